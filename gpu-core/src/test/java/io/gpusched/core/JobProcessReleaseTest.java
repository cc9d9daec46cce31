package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import io.gpusched.core.GpuAllocationException.Reason;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A job run without a cgroup ({@code gpusched run --no-isolation}) is recorded by its process (pid and start time):
 * release of its allocation is refused while that process lives, from any process of the node; a pid whose start time
 * differs (the kernel reused it) does not hold it back; the record survives the ledger's JSON, also in a snapshot.
 */
class JobProcessReleaseTest {
    @TempDir
    Path state;

    private GpuScheduler open() {
        return GpuScheduler.builder().inventory(GpuInventories.simulated("dgx1-v100")).stateDir(state)
                .auditLogging(false).maintenanceInterval(Duration.ZERO).build();
    }

    @Test
    void releaseIsRefusedWhileTheRecordedJobProcessLives() throws Exception {
        Process job = new ProcessBuilder("sleep", "60").start();
        try (GpuScheduler host = open(); GpuScheduler other = open()) {
            Allocation a = host.allocate(GpuRequests.fromCliFlags("--gpu=2", "--job=train-1"));
            HolderProcess jp = HolderProcess.of(job.pid());
            assertThat(host.recordJobProcess(a.id(), jp).request().jobProcess()).contains(jp);
            assertThat(host.recordJobProcess(a.id(), jp).request().jobProcess()).as("recorded once, the same again")
                    .contains(jp);

            // another process of the node (its own view of the ledger file) is refused too, and nothing is released
            GpuAllocationException e = catchThrowableOfType(GpuAllocationException.class,
                    () -> other.release(a.id()));
            assertThat(e).as("release while the job runs").isNotNull();
            assertThat(e.reason()).isEqualTo(Reason.JOB_RUNNING);
            assertThat(e.getMessage()).contains(a.id(), "train-1", "pid " + job.pid(), "nothing was released");
            assertThat(other.allocation(a.id())).isPresent();
            assertThat(catchThrowableOfType(GpuAllocationException.class,
                    () -> other.releaseAll(List.of(a.id()))).reason()).isEqualTo(Reason.JOB_RUNNING);

            // the same pid with another start time is another process (a reused pid): it holds nothing back
            Allocation b = host.allocate(GpuRequests.fromCliFlags("--gpu=1"));
            host.recordJobProcess(b.id(), new HolderProcess(job.pid(), jp.startTime() + 1));
            assertThat(other.release(b.id())).isTrue();

            job.destroyForcibly();
            assertThat(job.waitFor(30, TimeUnit.SECONDS)).isTrue();
            assertThat(other.release(a.id())).as("the job has ended").isTrue();
        } finally {
            job.destroyForcibly();
        }
    }

    @Test
    void theJobProcessSurvivesTheLedgersJsonAndASnapshot() {
        HolderProcess jp = new HolderProcess(4242, 987654);
        LedgerRecord r = LedgerRecord.fromJson(LedgerRecord.toJson(new LedgerRecord.JobProcess("n-7", jp)));
        assertThat(r).isEqualTo(new LedgerRecord.JobProcess("n-7", jp));
        GpuRequest req = GpuRequest.builder().count(1).jobProcess(jp).build();
        LedgerRecord.Allocated al = new LedgerRecord.Allocated("n-7", List.of("GPU-x"), req,
                Instant.parse("2026-01-02T03:04:05Z"), Optional.empty());
        LedgerRecord back = LedgerRecord.fromJson(LedgerRecord.toJson(new LedgerRecord.Snapshot(List.of(al),
                List.of())));
        assertThat(((LedgerRecord.Snapshot) back).live().get(0).request().jobProcess()).contains(jp);
    }
}
