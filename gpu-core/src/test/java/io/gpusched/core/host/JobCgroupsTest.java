package io.gpusched.core.host;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowableOfType;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.NodeDescriptions;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * {@link JobCgroups} on real cgroups (root; cgroup2 and the v1 devices hierarchy, each where mounted): it ends every
 * process of a job cgroup, grandchildren included, and removes it; it never acts on a path that is not a job cgroup
 * (another name, a link, a directory outside cgroupfs with a forged {@code cgroup.procs}); it reports processes that
 * do not die (held by the v1 freezer) instead of returning as if they had; stale job cgroups of this node are found,
 * other nodes' are left alone. Facts (pids, directories) are read by {@link CgroupFixture}, not by the class.
 */
class JobCgroupsTest {

    static Stream<CgroupFixture.Hierarchy> hierarchies() {
        return CgroupFixture.hierarchies().stream();
    }

    @ParameterizedTest
    @MethodSource("hierarchies")
    void endKillsEveryProcessOfTheJobGrandchildrenIncludedAndRemovesItsCgroups(CgroupFixture.Hierarchy h)
            throws Exception {
        CgroupFixture.assumeUsable();
        try (CgroupFixture f = new CgroupFixture()) {
            Path job = f.mkdir(f.parent(h).resolve(JobCgroups.name("a1b2c3-7")));
            Path inner = f.mkdir(job.resolve("step")); // a cgroup the job made below its own
            List<Long> pids = f.startJob(job);
            List<Long> innerPids = f.startJob(inner);
            assertThat(JobCgroups.populated(job)).isTrue();
            assertThat(JobCgroups.pids(job)).containsAll(pids).containsAll(innerPids);

            JobCgroups.end(job, "a1b2c3-7", Duration.ofSeconds(10));

            for (long pid : Stream.concat(pids.stream(), innerPids.stream()).toList()) {
                assertThat(CgroupFixture.running(pid)).as("pid %d (%s) still runs", pid, h).isFalse();
            }
            assertThat(job).doesNotExist();
            JobCgroups.end(job, "a1b2c3-7"); // a cgroup that is gone is already ended
        }
    }

    @Test
    void aPathThatIsNotAJobCgroupOfThatAllocationIsNeverActedOn(@TempDir Path tmp) throws Exception {
        CgroupFixture.assumeUsable();
        try (CgroupFixture f = new CgroupFixture()) {
            Process victim = f.holder();
            // a directory on tmpfs/ext4 named like a job cgroup, whose cgroup.procs lists another process
            Path forged = Files.createDirectory(tmp.resolve(JobCgroups.name("a1b2c3-9")));
            Files.writeString(forged.resolve("cgroup.procs"), victim.pid() + "\n");
            assertThatThrownBy(() -> JobCgroups.end(forged, "a1b2c3-9")).isInstanceOf(JobCgroupException.class)
                    .hasMessageContaining("not on a cgroup file system");
            assertThat(victim.isAlive()).isTrue();

            CgroupFixture.Hierarchy h = CgroupFixture.hierarchies().get(0);
            Path other = f.mkdir(f.parent(h).resolve("system.slice-like"));
            List<Long> pids = f.startJob(other);
            assertThatThrownBy(() -> JobCgroups.end(other, "a1b2c3-9")).isInstanceOf(JobCgroupException.class)
                    .hasMessageContaining("named job-a1b2c3-9");
            Path wrongId = f.mkdir(other.getParent().resolve(JobCgroups.name("a1b2c3-10")));
            assertThatThrownBy(() -> JobCgroups.end(wrongId, "a1b2c3-9")).isInstanceOf(JobCgroupException.class);
            Path link = Files.createSymbolicLink(tmp.resolve(JobCgroups.name("a1b2c3-11")), other);
            assertThatThrownBy(() -> JobCgroups.end(link, "a1b2c3-11")).isInstanceOf(JobCgroupException.class)
                    .hasMessageContaining("symbolic link");
            assertThatThrownBy(() -> JobCgroups.end(Path.of("relative", "job-a1b2c3-9"), "a1b2c3-9"))
                    .isInstanceOf(JobCgroupException.class);
            for (long pid : pids) {
                assertThat(CgroupFixture.running(pid)).isTrue();
            }
        }
    }

    @Test
    void processesThatDoNotDieAreReportedByPidAndTheCgroupIsKept() throws Exception {
        CgroupFixture.assumeUsable();
        assumeTrue(CgroupFixture.freezer().isPresent(), "needs the v1 freezer (to hold processes SIGKILL cannot end)");
        try (CgroupFixture f = new CgroupFixture()) {
            Path job = f.mkdir(f.parent(CgroupFixture.hierarchies().get(0)).resolve(JobCgroups.name("a1b2c3-5")));
            List<Long> pids = f.startJob(job);
            Path frozen = f.freeze(pids);
            JobCgroupException e = catchThrowableOfType(
                    () -> JobCgroups.end(job, "a1b2c3-5", Duration.ofMillis(300)), JobCgroupException.class);
            assertThat(e).isNotNull();
            assertThat(e.pids()).containsAll(pids);
            assertThat(e.getMessage()).contains("did not end").contains(job.toString());
            assertThat(job).exists();
            CgroupFixture.thaw(frozen);
            JobCgroups.end(job, "a1b2c3-5", Duration.ofSeconds(10));
            assertThat(job).doesNotExist();
            for (long pid : pids) {
                assertThat(CgroupFixture.running(pid)).isFalse();
            }
        }
    }

    @Test
    void staleJobCgroupsOfThisNodeAreCleanedAndOthersLeftAlone(@TempDir Path state) throws Exception {
        CgroupFixture.assumeUsable();
        try (CgroupFixture f = new CgroupFixture();
             GpuScheduler s = GpuScheduler.builder().inventory(NodeDescriptions.profile("pcie-4xa10"))
                     .stateDir(state).auditLogging(false).maintenanceInterval(Duration.ZERO).build()) {
            Path parent = f.parent(CgroupFixture.hierarchies().get(0));
            Allocation released = s.allocate(GpuRequest.builder().build());
            s.release(released.id());
            Allocation live = s.allocate(GpuRequest.builder().build());
            Path stale = f.mkdir(parent.resolve(JobCgroups.name(released.id())));
            List<Long> stalePids = f.startJob(stale);
            Path mine = f.mkdir(parent.resolve(JobCgroups.name(live.id())));
            Path otherNode = f.mkdir(parent.resolve(JobCgroups.name("zzzzzz-" + released.id().split("-")[1])));
            List<Long> otherPids = f.startJob(otherNode);

            assertThat(JobCgroups.stale(parent, s)).containsExactly(stale);
            assertThat(JobCgroups.cleanStale(parent, s)).isEmpty();
            assertThat(stale).doesNotExist();
            assertThat(stalePids).allSatisfy(p -> assertThat(CgroupFixture.running(p)).isFalse());
            assertThat(mine).exists();
            assertThat(otherNode).exists();
            assertThat(otherPids).allSatisfy(p -> assertThat(CgroupFixture.running(p)).isTrue());
        }
    }

    @Test
    void namesAreJobDashIdAndAnIdThatIsNotAPlainTokenIsRefused() {
        assertThat(JobCgroups.name("a1b2c3-17")).isEqualTo("job-a1b2c3-17");
        assertThat(JobCgroups.allocationId(Path.of("/sys/fs/cgroup/gpusched/job-a1b2c3-17"))).contains("a1b2c3-17");
        assertThat(JobCgroups.allocationId(Path.of("/sys/fs/cgroup/gpusched/jobs"))).isEmpty();
        for (String bad : new String[]{"../x", "a/b", "", "a\nb", "-x"}) {
            assertThatThrownBy(() -> JobCgroups.name(bad)).isInstanceOf(IllegalArgumentException.class);
        }
    }
}
