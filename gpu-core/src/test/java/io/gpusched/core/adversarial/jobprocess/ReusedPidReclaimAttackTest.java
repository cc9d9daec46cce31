package io.gpusched.core.adversarial.jobprocess;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.HolderProcess;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 36: a reclaim ends an unfenced run's recorded job process "only while its start time matches" (README, A
 * killed run). A dead holder's allocation whose job process record names a pid that now belongs to another process
 * (the kernel reused it: same pid, another start time) is released without signalling that process. Attack that
 * holds.
 */
@Tag("adversarial")
class ReusedPidReclaimAttackTest {
    @TempDir
    Path state;

    private GpuScheduler open() {
        return GpuScheduler.builder().inventory(GpuInventories.simulated("dgx1-v100")).stateDir(state)
                .auditLogging(false).maintenanceInterval(Duration.ZERO).build();
    }

    @Test
    @Timeout(120)
    void aReclaimDoesNotKillTheProcessThatNowHasTheRecordedPid() throws Exception {
        Process run = new ProcessBuilder("sleep", "120").start();
        Process other = new ProcessBuilder("sleep", "120").start();
        try (GpuScheduler host = open(); GpuScheduler next = open()) {
            Allocation a = host.allocate(GpuRequest.builder().count(8).jobId("train")
                    .holder(HolderProcess.of(run.pid())).build());
            HolderProcess now = HolderProcess.of(other.pid());
            // the job's record: the pid the other process has now, with the start time the job had
            host.recordJobProcess(a.id(), new HolderProcess(other.pid(), now.startTime() + 7));
            run.destroyForcibly();
            assertThat(run.waitFor(30, TimeUnit.SECONDS)).isTrue();

            Allocation b = next.allocate(GpuRequest.builder().count(8).build());
            assertThat(b.deviceIndices()).as("the dead run's GPUs were reclaimed").hasSize(8);
            assertThat(next.allocation(a.id())).isEmpty();
            assertThat(other.isAlive()).as("pid %d (another start time than the record's) was not signalled",
                    other.pid()).isTrue();
        } finally {
            run.destroyForcibly();
            other.destroyForcibly();
        }
    }
}
