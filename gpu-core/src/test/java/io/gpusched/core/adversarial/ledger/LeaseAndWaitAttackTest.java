package io.gpusched.core.adversarial.ledger;

import static io.gpusched.core.adversarial.ledger.LedgerAttacks.one;
import static io.gpusched.core.adversarial.ledger.LedgerAttacks.open;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.NodeDescriptions;
import io.gpusched.testing.ManualClock;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Adversarial tests of leases, clocks and waiting on a ledger-backed scheduler: sub-millisecond leases across a
 * restart, a clock going backwards, requests larger than the node, a waiter whose strategy throws, close.
 * Written from the public API and the documented on-disk format only; see {@link LedgerAttacks}.
 */
@Tag("adversarial")
class LeaseAndWaitAttackTest {

    @TempDir
    Path tmp;

    @Test
    void aSubMillisecondLeaseSurvivesARestartWhileItHasNotEnded() throws Exception {
        Path dir = tmp.resolve("nanos");
        java.time.Instant t0 = java.time.Instant.parse("2026-01-01T00:00:00Z");
        ManualClock clock = new ManualClock(t0);
        String id;
        try (GpuScheduler a = open(dir, clock)) {
            id = a.allocate(GpuRequest.builder().count(1).exclusive().maxDuration(Duration.ofNanos(500)).build()).id();
        }
        try (GpuScheduler b = open(dir, clock)) {
            Allocation x = b.allocation(id).orElse(null);
            assertNotNull(x, "an acknowledged 500 ns lease that has not ended is live after a restart");
            assertTrue(x.expiresAt().orElseThrow().isAfter(t0), "expiry " + x.expiresAt());
        }
    }

    @Test
    void aClockGoingBackwardsEndsNoLeaseEarly() throws Exception {
        Path dir = tmp.resolve("back");
        java.time.Instant t0 = java.time.Instant.parse("2026-01-01T12:00:00Z");
        ManualClock clock = new ManualClock(t0);
        try (GpuScheduler a = open(dir, clock); GpuScheduler b = open(dir, clock)) {
            Allocation x = a.allocate(GpuRequest.builder().count(1).exclusive().maxDuration(Duration.ofMinutes(10))
                    .build());
            clock.set(t0.minus(Duration.ofDays(1)));
            a.maintain();
            b.maintain();
            assertTrue(b.allocation(x.id()).isPresent(), "a lease is not ended by a clock going back");
            Allocation r = b.renew(x.id(), Duration.ofMinutes(5));
            assertEquals(x.deviceIndices(), r.deviceIndices());
            clock.set(t0.plus(Duration.ofMinutes(1)));
            a.maintain();
            assertTrue(a.allocation(x.id()).isPresent(), "still inside the first lease");
        }
    }

    @Test
    void aRequestLargerThanTheNodeFailsAtOnceEvenWhenWaiting() throws Exception {
        Path dir = tmp.resolve("big");
        try (GpuScheduler a = open(dir)) {
            AtomicReference<Object> got = new AtomicReference<>();
            CountDownLatch done = new CountDownLatch(1);
            Thread t = new Thread(() -> {
                try {
                    got.set(a.allocate(GpuRequest.builder().count(5).exclusive().build(), Duration.ofMinutes(10)));
                } catch (Throwable e) {
                    got.set(e);
                } finally {
                    done.countDown();
                }
            });
            t.setDaemon(true);
            t.start();
            assertTrue(done.await(60, TimeUnit.SECONDS), "5 GPUs on a 4-GPU node are refused, not waited for");
            assertTrue(got.get() instanceof GpuAllocationException, "was " + got.get());
            assertFalse(((GpuAllocationException) got.get()).reason().isTransient(), got.get().toString());
        }
    }

    @Test
    void aWaiterWhoseStrategyThrowsHandsTheQueueOn() throws Exception {
        Path dir = tmp.resolve("boom");
        io.gpusched.core.AllocationStrategy packing = io.gpusched.core.AllocationStrategies.packing();
        io.gpusched.core.AllocationStrategy boom = new io.gpusched.core.AllocationStrategy() {
            @Override
            public String name() {
                return "boom";
            }

            @Override
            public List<Integer> select(GpuRequest request, io.gpusched.core.SchedulingView view) {
                if (request.labels().containsKey("boom")) {
                    throw new IllegalStateException("strategy failure injected by the test");
                }
                return packing.select(request, view);
            }
        };
        try (GpuScheduler other = open(dir);
             GpuScheduler s = GpuScheduler.builder()
                     .inventory(NodeDescriptions.profile("pcie-4xa10"))
                     .stateDir(dir)
                     .strategy(boom)
                     .maintenanceInterval(Duration.ZERO)
                     .build()) {
            List<Allocation> all = new ArrayList<>();
            for (int i = 0; i < 4; i++) {
                all.add(other.allocate(one()));
            }
            AtomicReference<Object> first = new AtomicReference<>();
            AtomicReference<Object> second = new AtomicReference<>();
            CountDownLatch done = new CountDownLatch(2);
            Thread t1 = new Thread(() -> {
                try {
                    first.set(s.allocate(GpuRequest.builder().count(1).exclusive().label("boom", "1").build(),
                            Duration.ofMinutes(10)));
                } catch (Throwable e) {
                    first.set(e);
                } finally {
                    done.countDown();
                }
            });
            Thread t2 = new Thread(() -> {
                try {
                    second.set(s.allocate(one(), Duration.ofMinutes(10)));
                } catch (Throwable e) {
                    second.set(e);
                } finally {
                    done.countDown();
                }
            });
            t1.setDaemon(true);
            t2.setDaemon(true);
            t1.start();
            awaitBlocked(t1);
            t2.start();
            awaitBlocked(t2);
            other.release(all.get(0).id());
            assertTrue(done.await(60, TimeUnit.SECONDS), "both waiters ended: " + first.get() + " / " + second.get());
            assertTrue(first.get() instanceof RuntimeException, "the failing waiter failed: " + first.get());
            assertTrue(second.get() instanceof Allocation, "the next waiter got the freed GPU: " + second.get());
        }
    }

    /**
     * Waits until the thread is parked (waiting inside allocate), by observing its state, or has ended (a scheduler
     * that decides on its last snapshot may run the strategy before it has caught up with another process, and a
     * strategy that throws then fails the call at once instead of after a wait).
     */
    private static void awaitBlocked(Thread t) throws InterruptedException {
        while (t.getState() != Thread.State.TIMED_WAITING && t.getState() != Thread.State.WAITING
                && t.getState() != Thread.State.TERMINATED) {
            Thread.sleep(5);
        }
        Thread.sleep(50);
    }

    @Test
    void closeWakesAWaiter() throws Exception {
        Path dir = tmp.resolve("close");
        GpuScheduler a = open(dir);
        for (int i = 0; i < 4; i++) {
            a.allocate(one());
        }
        AtomicReference<Object> got = new AtomicReference<>();
        CountDownLatch started = new CountDownLatch(1);
        CountDownLatch done = new CountDownLatch(1);
        Thread t = new Thread(() -> {
            try {
                started.countDown();
                got.set(a.allocate(one(), Duration.ofMinutes(10)));
            } catch (Throwable e) {
                got.set(e);
            } finally {
                done.countDown();
            }
        });
        t.setDaemon(true);
        t.start();
        started.await();
        a.close();
        assertTrue(done.await(60, TimeUnit.SECONDS), "a waiter of a closed scheduler ends");
        assertFalse(got.get() instanceof Allocation, "a closed scheduler allocated: " + got.get());
    }
}
