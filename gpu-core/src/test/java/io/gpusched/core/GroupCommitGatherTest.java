package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

import io.gpusched.testing.OwnThread;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Group commit's gathering step, observed through the ledger's own force counter and its state, never through time:
 * the leader of a batch waits for the threads of the previous batch that have not queued again, so two committing
 * threads keep sharing one force instead of settling into alternating batches; a lone thread, and a thread whose
 * batch-mates have ended, never wait. The gathering wait is set to minutes here, so a leader that waits when it must
 * not hangs the test (stopped by {@link Timeout}, a hang guard, not a speed check).
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class GroupCommitGatherTest {
    private static final long LONG_GATHER = TimeUnit.MINUTES.toNanos(10);

    private static DefaultGpuScheduler scheduler(Path dir) {
        return (DefaultGpuScheduler) GpuScheduler.builder().inventory(GpuInventories.simulated("dgx-h100"))
                .stateDir(dir).auditLogging(false).maintenanceInterval(Duration.ZERO).build();
    }

    /**
     * A shared slice: requests decided on one snapshot never invalidate each other (two exclusive picks of the same
     * best GPU would send one back for a retry, outside the batch this test arranges).
     */
    private static GpuRequest one() {
        return GpuRequest.builder().shared(MemorySize.ofMebibytes(1)).owner("gather").build();
    }

    private static long forces(GpuScheduler s) {
        return s.ledgerStatistics().orElseThrow().forces();
    }

    private static void await(String what, BooleanSupplier c) throws InterruptedException {
        for (int i = 0; i < 6000; i++) {
            if (c.getAsBoolean()) {
                return;
            }
            Thread.sleep(10);
        }
        fail("gave up waiting until " + what);
    }

    /**
     * Makes A's and B's allocations one batch: a third change holds the lock (its decision waits on a latch) while
     * both queue behind it.
     */
    private static void batchTogether(DefaultGpuScheduler s, ExecutorService a, ExecutorService b) throws Exception {
        CountDownLatch inside = new CountDownLatch(1);
        CountDownLatch open = new CountDownLatch(1);
        CompletableFuture<Void> blocker = OwnThread.run(() -> s.ledger().commit((state, seq) -> {
            inside.countDown();
            try {
                open.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            return Ledger.Decision.of(null);
        }));
        assertThat(inside.await(60, TimeUnit.SECONDS)).as("the blocking change runs").isTrue();
        Future<Allocation> fa = a.submit(() -> s.allocate(one()));
        Future<Allocation> fb = b.submit(() -> s.allocate(one()));
        await("A and B are queued behind the blocking change", () -> s.ledger().queued() == 2);
        long before = forces(s);
        open.countDown();
        blocker.get(60, TimeUnit.SECONDS);
        fa.get(60, TimeUnit.SECONDS);
        fb.get(60, TimeUnit.SECONDS);
        assertThat(forces(s) - before).as("A's and B's allocations were written with one force").isEqualTo(1);
    }

    @Test
    void theLeaderWaitsForThePreviousBatchSoTheyShareTheNextForce(@TempDir Path dir) throws Exception {
        ExecutorService a = Executors.newSingleThreadExecutor();
        ExecutorService b = Executors.newSingleThreadExecutor();
        try (DefaultGpuScheduler s = scheduler(dir)) {
            s.ledger().gatherFor(LONG_GATHER);
            batchTogether(s, a, b);
            Thread threadA = a.submit(Thread::currentThread).get();
            long before = forces(s);
            Future<Allocation> again = a.submit(() -> s.allocate(one()));
            await("A, leading the next batch, waits for B (its batch-mate) to queue",
                    () -> s.ledger().gathering() == threadA);
            assertThat(again).as("A is not written before B has queued").isNotDone();
            Allocation fromB = b.submit(() -> s.allocate(one())).get(60, TimeUnit.SECONDS);
            Allocation fromA = again.get(60, TimeUnit.SECONDS);
            assertThat(forces(s) - before).as("A's and B's second changes shared one force").isEqualTo(1);
            assertThat(s.ledgerStatistics().orElseThrow().records()).isPositive();
        } finally {
            a.shutdownNow();
            b.shutdownNow();
        }
    }

    @Test
    void aLoneThreadNeverWaits(@TempDir Path dir) {
        try (DefaultGpuScheduler s = scheduler(dir)) {
            s.ledger().gatherFor(LONG_GATHER);
            long before = forces(s);
            for (int i = 0; i < 20; i++) {
                s.release(s.allocate(one()).id());
            }
            assertThat(forces(s) - before).as("one force per change, none waiting for a batch-mate").isEqualTo(40);
        }
    }

    @Test
    void aBatchMateThatEndedIsNotWaitedFor(@TempDir Path dir) throws Exception {
        ExecutorService a = Executors.newSingleThreadExecutor();
        ExecutorService b = Executors.newSingleThreadExecutor();
        try (DefaultGpuScheduler s = scheduler(dir)) {
            s.ledger().gatherFor(LONG_GATHER);
            batchTogether(s, a, b);
            Thread threadB = b.submit(Thread::currentThread).get();
            b.shutdown();
            assertThat(b.awaitTermination(60, TimeUnit.SECONDS)).isTrue();
            threadB.join(60_000);
            assertThat(threadB.isAlive()).isFalse();
            Allocation alone = a.submit(() -> s.allocate(one())).get(100, TimeUnit.SECONDS);
            assertThat(alone.deviceUuids()).hasSize(1);
        } finally {
            a.shutdownNow();
            b.shutdownNow();
        }
    }
}
