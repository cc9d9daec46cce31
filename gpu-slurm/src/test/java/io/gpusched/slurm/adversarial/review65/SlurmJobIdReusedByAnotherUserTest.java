package io.gpusched.slurm.adversarial.review65;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingSampler;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.HostIdleEffects;
import io.gpusched.accounting.ReportViews;
import io.gpusched.accounting.UsageReport;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.host.AllocationAttribution;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.core.sim.UsageTrace;
import io.gpusched.slurm.SlurmJobAttribution;
import io.gpusched.testing.ManualClock;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.UserPrincipal;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review 65. docs/ACCOUNTING.md, "Reports": {@code report --by slurm-job} has "one row per ... job (its id, then its
 * user)", and "Pods and Slurm jobs in the store": a job's track has as owner "the job's user". Slurm reuses job ids
 * (they wrap at {@code MaxJobId} back to {@code FirstJobId}, and a controller whose state was reset starts at
 * {@code FirstJobId} again), so over the store's 400 days of retention the same id can be two users' jobs. The store
 * keeps them apart (two tracks, each with its own owner), and {@code --by owner} charges each user their own; but
 * {@code --by slurm-job} folds both tracks into one row labelled with the first track's user only: the second
 * user's GPU time is shown as the first user's.
 */
class SlurmJobIdReusedByAnotherUserTest {
    private static final Duration STEP = Duration.ofSeconds(10);

    @TempDir
    Path dir;

    private void process(int pid, String cgroup, String user) throws IOException {
        Path d = Files.createDirectories(dir.resolve("proc").resolve(Integer.toString(pid)));
        Files.writeString(d.resolve("cgroup"), cgroup);
        UserPrincipal u = d.getFileSystem().getUserPrincipalLookupService().lookupPrincipalByName(user);
        Files.setOwner(d, u); // the owner of /proc/<pid> is the process's (the JVM runs as root here)
    }

    @Test
    void aSlurmJobIdReusedByAnotherUserIsNotReportedAsTheFirstUsersJob() throws IOException {
        // job 777 of "nobody", then (the id reused) job 777 of "daemon": cgroup v2 names no uid, the owner of the
        // process does
        process(5101, "0::/system.slice/slurmstepd.scope/job_777/step_0/user/task_0\n", "nobody");
        process(6101, "0::/system.slice/slurmstepd.scope/job_777/step_0/user/task_0\n", "daemon");
        ManualClock clock = new ManualClock(Instant.parse("2026-03-02T10:00:00Z"));
        SimulatedGpuInventory.Builder b = SimulatedGpuInventory.builder("slurm").clock(clock).energyCounters(true);
        for (int i = 0; i < 2; i++) {
            b.device(GpuDevice.builder().index(i).uuid("GPU-reuse-" + i).vendor(GpuVendor.NVIDIA)
                    .name("NVIDIA A100-SXM4-40GB").memory(MemorySize.ofGibibytes(40))
                    .pciBusId("00000000:0" + i + ":00.0").build());
        }
        SimulatedGpuInventory inventory = b.build();
        Path state = dir.resolve("state");
        try (GpuScheduler scheduler = GpuScheduler.builder().inventory(inventory).clock(clock).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).build();
             AccountingSampler sampler = AccountingSampler.open(AccountingStore.at(state),
                     AccountingSettings.defaults().withAttribution(List.of("slurm")), inventory,
                     AllocationAttribution.host().orElse(SlurmJobAttribution.of(dir.resolve("proc"))),
                     new HostIdleEffects(scheduler), clock).orElseThrow()) {
            inventory.setProcessTraces(0, Map.of(5101, UsageTrace.of(STEP, 40)));
            sampler.sweep(inventory.sample(), scheduler.allocations());
            for (int i = 0; i < 12; i++) {
                clock.advance(STEP);
                sampler.sweep(inventory.sample(), scheduler.allocations());
            }
            // nobody's job 777 ends; a process of no job stays on the GPU, so its list is read (no track kept unlisted)
            inventory.setProcessTraces(0, Map.of(9999, UsageTrace.of(STEP, 0)));
            for (int i = 0; i < 40; i++) { // well past any bound that keeps a track
                clock.advance(STEP);
                sampler.sweep(inventory.sample(), scheduler.allocations());
            }
            inventory.setProcessTraces(1, Map.of(6101, UsageTrace.of(STEP, 80))); // daemon's job 777
            for (int i = 0; i < 12; i++) {
                clock.advance(STEP);
                sampler.sweep(inventory.sample(), scheduler.allocations());
            }
            inventory.setProcessTraces(1, Map.of(9999, UsageTrace.of(STEP, 0)));
            for (int i = 0; i < 40; i++) {
                clock.advance(STEP);
                sampler.sweep(inventory.sample(), scheduler.allocations());
            }
        }
        AccountingStore store = AccountingStore.at(state);
        Instant since = Instant.parse("2026-03-02T09:00:00Z");
        Instant until = Instant.parse("2026-03-02T12:00:00Z");
        UsageReport byOwner = UsageReport.of(store, since, until, UsageReport.GroupBy.OWNER);
        UsageReport byJob = UsageReport.of(store, since, until, UsageReport.GroupBy.SLURM_JOB);
        Map<String, Long> owners = new TreeMap<>();
        byOwner.rows().forEach(r -> owners.merge(r.owner().orElse(""), r.figures().heldMillis(), Long::sum));
        Map<String, Long> jobsPerUser = new TreeMap<>();
        byJob.rows().stream().filter(r -> !r.key().isEmpty())
                .forEach(r -> jobsPerUser.merge(r.owner().orElse(""), r.figures().heldMillis(), Long::sum));
        assertThat(owners).as("precondition: --by owner charges each user their own job 777%n%s",
                ReportViews.text(byOwner)).containsOnlyKeys("nobody", "daemon");
        assertThat(jobsPerUser).as("--by slurm-job names each job's user (\"its id, then its user\"): the GPU time"
                + " of the rows naming a user must be that user's, as --by owner has it; the reused id 777 must not"
                + " show daemon's job as nobody's%n--by slurm-job:%n%s--by owner:%n%s", ReportViews.text(byJob),
                ReportViews.text(byOwner)).isEqualTo(owners);
    }
}
