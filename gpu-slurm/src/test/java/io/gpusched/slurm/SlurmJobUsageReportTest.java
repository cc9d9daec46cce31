package io.gpusched.slurm;

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
import io.gpusched.testing.ManualClock;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A Slurm node end to end: the job of each process on a GPU read from its {@code /proc/<pid>/cgroup} (a tree laid out
 * as the kernel's), the node's accounting sampler meters the GPUs Slurm's jobs use, and {@code report --by slurm-job}
 * shows each job's scripted figures and user.
 */
class SlurmJobUsageReportTest {
    private static final Duration STEP = Duration.ofSeconds(10);

    @TempDir
    Path dir;

    private Path process(int pid, String cgroup) throws IOException {
        Path d = Files.createDirectories(dir.resolve("proc").resolve(Integer.toString(pid)));
        Files.writeString(d.resolve("cgroup"), cgroup);
        return d;
    }

    @Test
    void slurmJobsAreReportedByJobWithTheirUsers() throws IOException {
        Path p5101 = process(5101, "0::/system.slice/slurmstepd.scope/job_777/step_0/user/task_0\n");
        process(5102, "0::/system.slice/slurmstepd.scope/job_777/step_1/user/task_0\n");
        process(5201, "4:devices:/slurm/uid_54321/job_778/step_batch\n3:memory:/slurm/uid_54321/job_778/"
                + "step_batch/task_0\n");
        ManualClock clock = new ManualClock(Instant.parse("2026-03-02T10:00:00Z"));
        SimulatedGpuInventory.Builder b = SimulatedGpuInventory.builder("slurm").clock(clock).energyCounters(true);
        for (int i = 0; i < 3; i++) {
            b.device(GpuDevice.builder().index(i).uuid("GPU-slurm-" + i).vendor(GpuVendor.NVIDIA)
                    .name("NVIDIA A100-SXM4-40GB").memory(MemorySize.ofGibibytes(40))
                    .pciBusId("00000000:0" + i + ":00.0").build());
        }
        SimulatedGpuInventory inventory = b.build();
        // job 777: two steps on GPU 0 (30 % and 20 %); job 778: GPU 1 at 90 %; GPU 2: nobody's process (no job)
        inventory.setProcessTraces(0, Map.of(5101, UsageTrace.of(STEP, 30), 5102, UsageTrace.of(STEP, 20)));
        inventory.setProcessTraces(1, Map.of(5201, UsageTrace.of(STEP, 90)));
        inventory.setProcessTraces(2, Map.of(5301, UsageTrace.of(STEP, 50)));
        Path state = dir.resolve("state");
        try (GpuScheduler scheduler = GpuScheduler.builder().inventory(inventory).clock(clock).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).build();
             AccountingSampler sampler = AccountingSampler.open(AccountingStore.at(state),
                     AccountingSettings.defaults().withAttribution(List.of("slurm")), inventory,
                     AllocationAttribution.host().orElse(SlurmJobAttribution.of(dir.resolve("proc"))),
                     new HostIdleEffects(scheduler), clock).orElseThrow()) {
            sampler.sweep(inventory.sample(), scheduler.allocations());
            for (int i = 0; i < 24; i++) {
                clock.advance(STEP);
                sampler.sweep(inventory.sample(), scheduler.allocations());
            }
        }
        UsageReport r = UsageReport.of(AccountingStore.at(state), Instant.parse("2026-03-02T09:00:00Z"),
                Instant.parse("2026-03-02T11:00:00Z"), UsageReport.GroupBy.SLURM_JOB);
        Map<String, UsageReport.Row> rows = new HashMap<>();
        r.rows().forEach(x -> rows.put(x.key(), x));
        assertThat(rows.keySet()).as(ReportViews.text(r)).containsExactlyInAnyOrder("777", "778");
        UsageReport.Row j777 = rows.get("777");
        assertThat(j777.figures().heldMillis()).as("4 minutes of sweeps on one GPU").isEqualTo(240_000);
        assertThat(j777.figures().meanUtilization().getAsDouble()).as("both steps' processes").isEqualTo(50.0);
        assertThat(j777.owner()).as("the owner of its process").contains(Files.getOwner(p5101).getName());
        UsageReport.Row j778 = rows.get("778");
        assertThat(j778.figures().meanUtilization().getAsDouble()).isEqualTo(90.0);
        assertThat(j778.devices()).containsExactly(1);
        if (!Files.getAttribute(dir.resolve("proc/5201"), "unix:uid").equals(54321)) {
            assertThat(j778.owner()).as("its process is not uid 54321's: the uid the path names").contains(
                    "uid 54321");
        }
        assertThat(r.total().heldMillis()).as("GPU 2's process is in no job: not charged").isEqualTo(480_000);
    }
}
