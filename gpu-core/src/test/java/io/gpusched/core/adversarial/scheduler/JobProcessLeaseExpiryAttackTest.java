package io.gpusched.core.adversarial.scheduler;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.HolderProcess;
import io.gpusched.testing.ManualClock;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 36, rough edge "release of an allocation a running gpusched run holds succeeds silently, and the job keeps
 * running on GPUs the next caller gets": the fix records an unfenced job's process (ledger record {@code JP}) and
 * refuses {@code release} while it lives; a lease that ends the allocation ({@code release_on_expiry}) does not consult
 * it, and hands the GPUs out while the job runs ({@code gpusched run --no-isolation --lease 2s} reaches it).
 */
@Tag("adversarial")
class JobProcessLeaseExpiryAttackTest {
    @TempDir
    Path state;

    private GpuScheduler open(ManualClock clock, boolean releaseOnExpiry) {
        return GpuScheduler.builder().inventory(GpuInventories.simulated("dgx1-v100")).stateDir(state).clock(clock)
                .config(GpuConfig.builder().releaseOnExpiry(releaseOnExpiry).build()).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).build();
    }

    private static Process job() throws Exception {
        return new ProcessBuilder("sleep", "120").start();
    }

    private static void end(Process p) throws InterruptedException {
        p.destroyForcibly();
        p.waitFor(30, TimeUnit.SECONDS);
    }

    /**
     * A lease that ends its allocation ends a fenced job's cgroup first (README, Leases: "ending its job cgroup
     * first"); an unfenced job's recorded process is not consulted: the allocation is released and its 8 GPUs are
     * handed out again while the job still runs on them (two jobs on the same GPUs).
     */
    @Test
    void aLeaseThatEndsTheAllocationDoesNotHandItsGpusOutWhileTheRecordedJobRuns() throws Exception {
        ManualClock clock = new ManualClock(Instant.now());
        Process job = job();
        try (GpuScheduler host = open(clock, true); GpuScheduler next = open(clock, true)) {
            Allocation a = host.allocate(GpuRequest.builder().count(8).jobId("train-1")
                    .maxDuration(Duration.ofSeconds(30)).build());
            host.recordJobProcess(a.id(), HolderProcess.of(job.pid()));
            clock.advance(Duration.ofSeconds(31));
            Allocation b = null;
            try {
                b = next.allocate(GpuRequests.fromCliFlags("--gpu=8"));
            } catch (GpuAllocationException held) {
                // kept held while the job runs: fine
            }
            boolean handedOut = b != null;
            // the scheduler ends the job (SIGKILL) before it hands the GPUs out; the JDK reaps its child on a thread of
            // its own, so Process.isAlive may say true for a moment after the kill: a job still alive after a bounded
            // wait for that reaping is one that runs (sleep 120)
            boolean runs = job.isAlive() && !job.waitFor(20, TimeUnit.SECONDS);
            assertThat(handedOut && runs)
                    .as("lease of %s ended: its GPUs were handed out again (%s) while its recorded job pid %d runs",
                            a.id(), b == null ? "-" : b.id() + " " + b.deviceIndices(), job.pid())
                    .isFalse();
        } finally {
            end(job);
        }
    }
}
