package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowableOfType;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.GpuAllocationException.Reason;
import io.gpusched.core.host.CgroupFixture;
import io.gpusched.core.host.JobCgroups;
import io.gpusched.core.sim.NodeDescriptions;
import io.gpusched.testing.LedgerReader;
import io.gpusched.testing.ManualClock;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Issue 36 item 1, in the library: an allocation whose holder is gone while its job (a grandchild of the holder,
 * which no parent-death signal reaches) still runs in the recorded job cgroup is not handed out again until the job
 * is ended and its cgroup removed; when the job cannot be ended the allocation stays held, and the status, the audit
 * and the log say so; a release while the job runs is refused. Real cgroups (root): cgroup2 and the v1 devices
 * hierarchy, each where mounted; the v1 freezer holds processes that SIGKILL cannot end. Facts come from /proc,
 * cgroupfs and the independent {@link LedgerReader}.
 */
class JobCgroupReclaimTest {
    @TempDir
    Path state;

    final List<AllocationEvent> events = new CopyOnWriteArrayList<>();

    static Stream<CgroupFixture.Hierarchy> hierarchies() {
        return CgroupFixture.hierarchies().stream();
    }

    @AfterEach
    void restoreTimes() {
        JobCgroupReclaim.timeout = Duration.ofSeconds(2);
        JobCgroupReclaim.retry = Duration.ofSeconds(10);
    }

    GpuScheduler open() {
        return GpuScheduler.builder().inventory(NodeDescriptions.profile("pcie-4xa10")).stateDir(state)
                .auditLogging(false).maintenanceInterval(Duration.ZERO).listener(events::add).build();
    }

    /** Allocates all four GPUs bound to {@code holder}, makes its job cgroup, records it, starts the job there. */
    private Allocation jobOn(GpuScheduler s, CgroupFixture f, Path parent, Process holder, List<Long> pidsOut)
            throws Exception {
        Allocation a = s.allocate(GpuRequest.builder().count(4).jobId("train")
                .holder(HolderProcess.of(holder.pid())).build());
        Path cg = f.mkdir(parent.resolve(JobCgroups.name(a.id())));
        Allocation recorded = s.recordJobCgroup(a.id(), cg);
        assertThat(recorded.request().jobCgroup()).contains(cg.toString());
        pidsOut.addAll(f.startJob(cg));
        return recorded;
    }

    @ParameterizedTest
    @MethodSource("hierarchies")
    void aDeadHoldersJobIsEndedAndItsCgroupRemovedBeforeItsGpusAreHandedOutAgain(CgroupFixture.Hierarchy h)
            throws Exception {
        CgroupFixture.assumeUsable();
        try (CgroupFixture f = new CgroupFixture()) {
            Path parent = f.parent(h);
            Process holder = f.holder();
            List<Long> job = new ArrayList<>();
            Allocation a;
            try (GpuScheduler s = open()) {
                a = jobOn(s, f, parent, holder, job);
            }
            holder.destroyForcibly();
            holder.waitFor(10, TimeUnit.SECONDS);
            try (GpuScheduler other = open()) {
                Allocation next = other.allocate(GpuRequest.builder().count(4).build());
                // handed out again: by now the job (its grandchild sleep too) must be gone and its cgroup removed
                for (long pid : job) {
                    assertThat(CgroupFixture.running(pid)).as("pid %d of %s's job still runs while %s holds its"
                            + " GPUs (%s)", pid, a.id(), next.id(), h).isFalse();
                }
                assertThat(Path.of(a.request().jobCgroup().orElseThrow())).doesNotExist();
                assertThat(next.deviceIndices()).containsExactlyInAnyOrderElementsOf(a.deviceIndices());
            }
            assertThat(LedgerReader.read(state).ended).anySatisfy(e -> {
                assertThat(e.id()).isEqualTo(a.id());
                assertThat(e.cause()).isEqualTo("RECLAIMED");
            });
        }
    }

    @Test
    void aJobThatCannotBeEndedKeepsItsAllocationHeldAndSaysSoUntilItEnds() throws Exception {
        CgroupFixture.assumeUsable();
        assumeTrue(CgroupFixture.freezer().isPresent(), "needs the v1 freezer (to hold processes SIGKILL cannot end)");
        JobCgroupReclaim.timeout = Duration.ofMillis(300);
        JobCgroupReclaim.retry = Duration.ofMillis(200);
        try (CgroupFixture f = new CgroupFixture()) {
            Path parent = f.parent(CgroupFixture.hierarchies().get(0));
            Process holder = f.holder();
            List<Long> job = new ArrayList<>();
            Allocation a;
            try (GpuScheduler s = open()) {
                a = jobOn(s, f, parent, holder, job);
            }
            Path frozen = f.freeze(job);
            holder.destroyForcibly();
            holder.waitFor(10, TimeUnit.SECONDS);
            try (GpuScheduler other = open()) {
                GpuAllocationException e = catchThrowableOfType(() -> other.allocate(GpuRequest.builder().count(1)
                        .build()), GpuAllocationException.class);
                assertThat(e).as("a GPU was handed out while the dead holder's job still runs").isNotNull();
                assertThat(e.reason()).isEqualTo(Reason.INSUFFICIENT_GPUS);
                assertThat(other.allocation(a.id())).isPresent();
                assertThat(events).anySatisfy(ev -> {
                    assertThat(ev.type()).isEqualTo(AllocationEvent.Type.RECLAIM_BLOCKED);
                    assertThat(ev.allocationId()).contains(a.id());
                    assertThat(ev.message()).contains("kept held").contains("did not end");
                });
                assertThat(other.status().notes()).anySatisfy(n -> assertThat(n).contains(a.id())
                        .contains("kept held"));
                assertThat(other.status().allocations()).anySatisfy(x -> assertThat(x.jobCgroup())
                        .isEqualTo(a.request().jobCgroup().get()));
                for (long pid : job) {
                    assertThat(CgroupFixture.running(pid)).isTrue();
                }

                CgroupFixture.thaw(frozen);
                Allocation next = null;
                for (int i = 0; i < 1200 && next == null; i++) { // attempts every retry interval, up to 60 s (a loaded host)
                    next = other.tryAllocate(GpuRequest.builder().count(4).build()).orElse(null);
                    if (next == null) {
                        Thread.sleep(50);
                    }
                }
                assertThat(next).as("reclaimed once the job could be ended").isNotNull();
                for (long pid : job) {
                    assertThat(CgroupFixture.running(pid)).isFalse();
                }
                assertThat(other.status().notes()).noneSatisfy(n -> assertThat(n).contains("kept held"));
            }
        }
    }

    @Test
    void aForgedJobCgroupOutsideCgroupfsNeverMakesTheReclaimerKillAnything(@TempDir Path tmp) throws Exception {
        CgroupFixture.assumeUsable();
        try (CgroupFixture f = new CgroupFixture(); GpuScheduler s = open()) {
            Process victim = f.holder();
            // learn the next id (prefix and sequence), then allocate bound to a holder that is already gone, with a
            // job cgroup on tmpfs whose cgroup.procs lists the victim: as a ledger writer with a hostile path could
            Allocation probe = s.allocate(GpuRequest.builder().build());
            s.release(probe.id());
            String prefix = probe.id().substring(0, probe.id().lastIndexOf('-'));
            long seq = Long.parseLong(probe.id().substring(probe.id().lastIndexOf('-') + 1)) + 2;
            String id = prefix + "-" + seq;
            Path forged = Files.createDirectory(tmp.resolve(JobCgroups.name(id)));
            Files.writeString(forged.resolve("cgroup.procs"), victim.pid() + "\n");
            Allocation a = s.allocate(GpuRequest.builder().count(4).holder(new HolderProcess(4_000_000L, 1))
                    .build().withJobCgroup(forged.toString()));
            assertThat(a.id()).isEqualTo(id);
            assertThat(s.tryAllocate(GpuRequest.builder().build())).isEmpty();
            assertThat(victim.isAlive()).as("the reclaimer killed a process outside any job cgroup").isTrue();
            assertThat(s.allocation(id)).isPresent();
            assertThat(s.status().notes()).anySatisfy(n -> assertThat(n).contains("not on a cgroup file system"));
        }
    }

    @Test
    void aReleaseWhileTheJobRunsIsRefusedNamingTheJobAndWhatToDo() throws Exception {
        CgroupFixture.assumeUsable();
        try (CgroupFixture f = new CgroupFixture(); GpuScheduler s = open()) {
            Path parent = f.parent(CgroupFixture.hierarchies().get(0));
            Process holder = f.holder();
            List<Long> job = new ArrayList<>();
            Allocation a = jobOn(s, f, parent, holder, job);
            GpuAllocationException e = catchThrowableOfType(() -> s.release(a.id()), GpuAllocationException.class);
            assertThat(e.reason()).isEqualTo(Reason.JOB_RUNNING);
            assertThat(e.getMessage()).contains(a.id()).contains("train").contains(String.valueOf(job.get(0)))
                    .contains("pid " + holder.pid());
            assertThatThrownBy(() -> s.releaseAll(List.of(a.id()))).isInstanceOf(GpuAllocationException.class);
            assertThat(s.allocation(a.id())).isPresent();
            JobCgroups.end(Path.of(a.request().jobCgroup().get()), a.id());
            assertThat(s.release(a.id())).isTrue();
        }
    }

    @Test
    void aLeaseThatEndsItsAllocationEndsItsJobFirst() throws Exception {
        CgroupFixture.assumeUsable();
        ManualClock clock = new ManualClock(Instant.now());
        try (CgroupFixture f = new CgroupFixture();
             GpuScheduler s = GpuScheduler.builder().inventory(NodeDescriptions.profile("pcie-4xa10"))
                     .stateDir(state).clock(clock).config(GpuConfig.builder().releaseOnExpiry(true).build())
                     .auditLogging(false).maintenanceInterval(Duration.ZERO).build()) {
            Path parent = f.parent(CgroupFixture.hierarchies().get(0));
            Allocation a = s.allocate(GpuRequest.builder().count(4).maxDuration(Duration.ofSeconds(30)).build());
            Path cg = f.mkdir(parent.resolve(JobCgroups.name(a.id())));
            s.recordJobCgroup(a.id(), cg);
            List<Long> job = f.startJob(cg);
            clock.advance(Duration.ofSeconds(31));
            assertThat(s.allocate(GpuRequest.builder().count(4).build()).devices()).hasSize(4);
            assertThat(job).allSatisfy(p -> assertThat(CgroupFixture.running(p)).isFalse());
            assertThat(cg).doesNotExist();
        }
    }

    @Test
    void aJobCgroupIsRecordedOnceUnderItsOwnNameOnly() throws Exception {
        CgroupFixture.assumeUsable();
        try (CgroupFixture f = new CgroupFixture(); GpuScheduler s = open()) {
            Path parent = f.parent(CgroupFixture.hierarchies().get(0));
            Allocation a = s.allocate(GpuRequest.builder().build());
            Path wrong = f.mkdir(parent.resolve("job-other-1"));
            assertThatThrownBy(() -> s.recordJobCgroup(a.id(), wrong)).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining(JobCgroups.name(a.id()));
            Path cg = f.mkdir(parent.resolve(JobCgroups.name(a.id())));
            s.recordJobCgroup(a.id(), cg);
            s.recordJobCgroup(a.id(), cg); // the same again is fine
            assertThatThrownBy(() -> s.recordJobCgroup("nothere-1", cg)).isInstanceOf(IllegalArgumentException.class);
            s.release(a.id());
            assertThatThrownBy(() -> s.recordJobCgroup(a.id(), cg)).isInstanceOf(GpuAllocationException.class)
                    .hasMessageContaining("released");
            GpuRequest named = GpuRequest.builder().build().withJobCgroup(parent.resolve("job-x-1").toString());
            assertThat(catchThrowableOfType(() -> s.allocate(named), GpuAllocationException.class).reason())
                    .isEqualTo(Reason.INVALID_REQUEST);
        }
    }
}
