package io.gpusched.core.adversarial.gather;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationEvent;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import java.lang.reflect.Method;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Can gathering starve or hang a change? Each scenario leaves batch-mates that do not come back (blocked elsewhere,
 * interrupted, ended, recycled by a pool, waiting in {@code allocate} for GPUs that never come, blocked on a lock the
 * committing thread holds) and requires every change to complete: a hang is caught by the {@link Timeout} hang guard
 * (not a speed check); the file is then checked by {@link History}.
 */
@Tag("adversarial")
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class GatherLivenessAttackTest {

    private static void checkFile(Path dir, List<String> acks) throws Exception {
        History h = History.check(dir.resolve("ledger"));
        h.acknowledged(acks);
        assertEquals(List.of(), h.violations, "ledger history");
    }

    /** Seven threads share a batch once, then block forever elsewhere; a lone thread's 300 changes still complete. */
    @Test
    void batchMatesThatBlockElsewhereDoNotStallALoneThread(@TempDir Path dir) throws Exception {
        List<String> acks = Collections.synchronizedList(new ArrayList<>());
        CountDownLatch never = new CountDownLatch(1);
        try (GpuScheduler s = Work.scheduler(dir)) {
            CountDownLatch go = new CountDownLatch(1);
            CountDownLatch committed = new CountDownLatch(7);
            List<Thread> ts = new ArrayList<>();
            for (int t = 0; t < 7; t++) {
                Thread th = new Thread(() -> {
                    try {
                        go.await();
                        Work.cycle(s, acks);
                        committed.countDown();
                        never.await(); // blocked elsewhere, alive, never commits again
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                });
                th.setDaemon(true);
                th.start();
                ts.add(th);
            }
            go.countDown();
            assertTrue(committed.await(60, TimeUnit.SECONDS), "the seven threads' changes completed");
            int n = 0;
            for (int i = 0; i < 150; i++) {
                n += Work.cycle(s, acks);
            }
            assertEquals(300, n, "changes of the lone thread acknowledged");
            never.countDown();
            for (Thread th : ts) {
                th.join();
            }
        }
        checkFile(dir, acks);
    }

    /** A fixed pool recycles its threads across 2,000 tasks; threads idle in the pool are alive but never queue. */
    @Test
    void recycledPoolThreadsComplete(@TempDir Path dir) throws Exception {
        List<String> acks = Collections.synchronizedList(new ArrayList<>());
        ExecutorService pool = Executors.newFixedThreadPool(8);
        try (GpuScheduler s = Work.scheduler(dir)) {
            List<Future<Integer>> fs = new ArrayList<>();
            for (int i = 0; i < 600; i++) {
                fs.add(pool.submit(() -> Work.cycle(s, acks)));
                if (i % 50 == 0) {
                    fs.get(fs.size() - 1).get(60, TimeUnit.SECONDS); // bursts, then idle pool threads
                }
            }
            int n = 0;
            for (Future<Integer> f : fs) {
                n += f.get(60, TimeUnit.SECONDS);
            }
            assertEquals(1200, n, "changes acknowledged (8 pool threads never refused one exclusive GPU each)");
        } finally {
            pool.shutdownNow();
        }
        checkFile(dir, acks);
    }

    /** Threads calling with their interrupt flag set: every change completes and the flag is still set after. */
    @Test
    void interruptedThreadsCompleteAndKeepTheirFlag(@TempDir Path dir) throws Exception {
        List<String> acks = Collections.synchronizedList(new ArrayList<>());
        AtomicInteger lostFlags = new AtomicInteger();
        AtomicInteger changes = new AtomicInteger();
        try (GpuScheduler s = Work.scheduler(dir)) {
            List<Thread> ts = new ArrayList<>();
            for (int t = 0; t < 8; t++) {
                Thread th = new Thread(() -> {
                    for (int i = 0; i < 30; i++) {
                        Thread.currentThread().interrupt();
                        changes.addAndGet(Work.cycle(s, acks));
                        if (!Thread.interrupted()) {
                            lostFlags.incrementAndGet();
                        }
                    }
                });
                th.start();
                ts.add(th);
            }
            for (Thread th : ts) {
                th.join();
            }
        }
        assertEquals(480, changes.get(), "changes acknowledged");
        assertEquals(0, lostFlags.get(), "calls that cleared the caller's interrupt flag");
        checkFile(dir, acks);
    }

    /** 100 rounds of 8 short-lived threads that commit once and end: ended batch-mates are never waited for. */
    @Test
    void endedThreadsAreNotWaitedFor(@TempDir Path dir) throws Exception {
        List<String> acks = Collections.synchronizedList(new ArrayList<>());
        AtomicInteger changes = new AtomicInteger();
        try (GpuScheduler s = Work.scheduler(dir)) {
            for (int round = 0; round < 100; round++) {
                List<Thread> ts = new ArrayList<>();
                for (int t = 0; t < 8; t++) {
                    Thread th = new Thread(() -> changes.addAndGet(Work.cycle(s, acks)));
                    th.start();
                    ts.add(th);
                }
                for (Thread th : ts) {
                    th.join();
                }
            }
        }
        assertEquals(1600, changes.get(), "changes acknowledged");
        checkFile(dir, acks);
    }

    /**
     * A batch-mate waits in {@code allocate(request, maxWait)} for all eight GPUs while five are held for the whole
     * test, re-committing a refusal after each change of the others (new allocations would queue behind it, first come
     * first served, so the others renew their leases): four threads' 60 renewals each complete, the waiter ends with a
     * refusal, and the file holds exactly the acknowledged changes.
     */
    @Test
    void aWaiterForGpusThatNeverComeDoesNotStallTheOthers(@TempDir Path dir) throws Exception {
        List<String> acks = Collections.synchronizedList(new ArrayList<>());
        AtomicInteger renewals = new AtomicInteger();
        try (GpuScheduler s = Work.scheduler(dir)) {
            List<Allocation> held = new ArrayList<>();
            for (int i = 0; i < 5; i++) {
                Allocation a = s.allocate(GpuRequest.builder().count(1).exclusive().maxDuration(Duration.ofHours(1))
                        .build());
                held.add(a);
                acks.add("A " + a.id() + " " + String.join(",", a.deviceUuids()));
            }
            Throwable[] waited = new Throwable[1];
            Thread waiter = new Thread(() -> {
                try {
                    s.allocate(GpuRequest.builder().count(8).exclusive().build(), Duration.ofSeconds(3));
                } catch (Throwable e) {
                    waited[0] = e;
                }
            });
            waiter.start();
            List<Thread> ts = new ArrayList<>();
            for (int t = 0; t < 4; t++) {
                String id = held.get(t).id();
                Thread th = new Thread(() -> {
                    for (int i = 0; i < 60; i++) {
                        s.renew(id, Duration.ofHours(1));
                        renewals.incrementAndGet();
                    }
                });
                th.start();
                ts.add(th);
            }
            for (Thread th : ts) {
                th.join();
            }
            waiter.join();
            assertTrue(waited[0] instanceof GpuAllocationException, "the waiter ended with a refusal: " + waited[0]);
            assertEquals(240, renewals.get(), "renewals acknowledged");
            for (Allocation a : held) {
                assertTrue(s.release(a.id()));
                acks.add("R " + a.id());
            }
        }
        History h = History.check(dir.resolve("ledger"));
        h.acknowledged(acks);
        assertEquals(List.of(), h.violations, "ledger history");
        assertEquals(acks.size() + 240, h.records, "records: allocations, releases and the 240 renewals");
    }

    /**
     * The user's lock: one thread allocates while holding it; the listener, run by whichever thread delivers the
     * ALLOCATED event, takes the same lock to release the allocation. Every allocation ends released.
     */
    @Test
    void releaseFromAListenerThatNeedsTheCallersLock(@TempDir Path dir) throws Exception {
        Object userLock = new Object();
        AtomicInteger releasedByListener = new AtomicInteger();
        GpuScheduler[] ref = new GpuScheduler[1];
        List<Throwable> errors = Collections.synchronizedList(new ArrayList<>());
        try (GpuScheduler s = GpuScheduler.builder().inventory(GpuInventories.simulated("dgx-h100")).stateDir(dir)
                .auditLogging(false).maintenanceInterval(Duration.ZERO).listener(e -> {
                    if (e.type() == AllocationEvent.Type.ALLOCATED && e.owner().orElse("").equals("listener")) {
                        synchronized (userLock) {
                            if (ref[0].release(e.allocationId().orElseThrow())) {
                                releasedByListener.incrementAndGet();
                            }
                        }
                    }
                }).build()) {
            ref[0] = s;
            List<Thread> ts = new ArrayList<>();
            for (int t = 0; t < 6; t++) {
                Thread th = new Thread(() -> {
                    try {
                        for (int i = 0; i < 25; i++) {
                            synchronized (userLock) {
                                s.allocate(GpuRequest.builder().count(1).exclusive().owner("listener").build(),
                                        Duration.ofSeconds(30));
                            }
                        }
                    } catch (Throwable e) {
                        errors.add(e);
                    }
                });
                th.start();
                ts.add(th);
            }
            for (Thread th : ts) {
                th.join();
            }
            assertEquals(List.of(), errors, "errors in the allocating threads");
            assertEquals(150, releasedByListener.get(), "allocations the listener released");
            assertEquals(List.of(), s.allocations(), "nothing left held");
        }
        assertEquals(List.of(), History.check(dir.resolve("ledger")).violations, "ledger history");
    }

    /**
     * 400 virtual threads (JDK 21+; this build's JDK is asked by reflection): while most of them wait for the batch in
     * flight on the ledger's monitor, the leader parks to gather; it must get a carrier again.
     */
    @Test
    void virtualThreadsComplete(@TempDir Path dir) throws Exception {
        Method m;
        try {
            m = Executors.class.getMethod("newVirtualThreadPerTaskExecutor");
        } catch (NoSuchMethodException e) {
            m = null;
        }
        Assumptions.assumeTrue(m != null, "virtual threads need JDK 21 or later; this is " + Runtime.version());
        List<String> acks = Collections.synchronizedList(new ArrayList<>());
        ExecutorService vt = (ExecutorService) m.invoke(null);
        try (GpuScheduler s = Work.scheduler(dir)) {
            List<Future<Integer>> fs = new ArrayList<>();
            for (int i = 0; i < 400; i++) {
                fs.add(vt.submit(() -> {
                    int n = 0;
                    for (int k = 0; k < 3; k++) {
                        n += Work.cycle(s, acks);
                    }
                    return n;
                }));
            }
            for (Future<Integer> f : fs) {
                f.get(80, TimeUnit.SECONDS);
            }
        } finally {
            vt.shutdownNow();
        }
        checkFile(dir, acks);
    }
}
