package io.gpusched.core.adversarial.ledger;

import static io.gpusched.core.adversarial.ledger.LedgerAttacks.checkFile;
import static io.gpusched.core.adversarial.ledger.LedgerAttacks.live;
import static io.gpusched.core.adversarial.ledger.LedgerAttacks.one;
import static io.gpusched.core.adversarial.ledger.LedgerAttacks.open;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationEvent;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.NodeDescriptions;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Adversarial tests of several schedulers ("processes") on one state directory in this JVM: no device handed
 * out twice, each foreign change given to listeners once, release and renew across schedulers, waiters woken.
 * Written from the public API and the documented on-disk format only; see {@link LedgerAttacks}.
 */
@Tag("adversarial")
class SchedulersOnOneLedgerAttackTest {

    @TempDir
    Path tmp;

    @Test
    void concurrentSchedulersOnOneDirNeverHandOutADeviceTwice() throws Exception {
        Path dir = tmp.resolve("conc");
        String old = System.getProperty("gpusched.ledger.compactBytes");
        System.setProperty("gpusched.ledger.compactBytes", "2048");
        List<GpuScheduler> scheds = new ArrayList<>();
        try {
            for (int i = 0; i < 3; i++) {
                scheds.add(open(dir));
            }
            String firstHeader = Files.readAllLines(dir.resolve("ledger")).get(0);
            Object modelLock = new Object();
            Map<Integer, String> heldBy = new HashMap<>();
            Set<String> ids = ConcurrentHashMap.newKeySet();
            List<String> violations = new CopyOnWriteArrayList<>();
            Map<String, List<Integer>> mine = new ConcurrentHashMap<>();
            int threads = 6;
            CountDownLatch start = new CountDownLatch(1);
            List<Thread> ts = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                final int seed = t;
                Thread th = new Thread(() -> {
                    Random r = new Random(seed);
                    List<Allocation> held = new ArrayList<>();
                    try {
                        start.await();
                        for (int op = 0; op < 150; op++) {
                            GpuScheduler s = scheds.get(r.nextInt(scheds.size()));
                            if (held.isEmpty() || r.nextInt(3) == 0) {
                                Allocation a = s.tryAllocate(one()).orElse(null);
                                if (a != null) {
                                    if (!ids.add(a.id())) {
                                        violations.add("duplicate id " + a.id());
                                    }
                                    synchronized (modelLock) {
                                        for (int d : a.deviceIndices()) {
                                            String prev = heldBy.putIfAbsent(d, a.id());
                                            if (prev != null) {
                                                violations.add("device " + d + " given to " + a.id()
                                                        + " while " + prev + " holds it");
                                            }
                                        }
                                    }
                                    held.add(a);
                                    mine.put(a.id(), a.deviceIndices());
                                }
                            } else if (r.nextInt(4) == 0) {
                                Allocation a = held.get(r.nextInt(held.size()));
                                Allocation renewed = s.renew(a.id(), Duration.ofHours(1));
                                if (!renewed.deviceIndices().equals(a.deviceIndices())) {
                                    violations.add("renew changed devices of " + a.id());
                                }
                            } else {
                                Allocation a = held.remove(r.nextInt(held.size()));
                                synchronized (modelLock) {
                                    for (int d : a.deviceIndices()) {
                                        heldBy.remove(d, a.id());
                                    }
                                }
                                mine.remove(a.id());
                                if (!s.release(a.id())) {
                                    violations.add("release of live " + a.id() + " returned false");
                                }
                            }
                        }
                    } catch (Throwable e) {
                        violations.add("thread " + seed + ": " + e);
                    }
                });
                ts.add(th);
                th.start();
            }
            start.countDown();
            for (Thread th : ts) {
                th.join();
            }
            assertEquals(List.of(), violations);
            Map<String, List<Integer>> expected = new TreeMap<>(mine);
            for (GpuScheduler s : scheds) {
                assertEquals(expected, live(s), "every scheduler agrees with the acknowledgements");
            }
            checkFile(dir.resolve("ledger"));
            String lastHeader = Files.readAllLines(dir.resolve("ledger")).get(0);
            assertFalse(firstHeader.split(" ")[3].equals(lastHeader.split(" ")[3]),
                    "the ledger was compacted during the run: " + firstHeader + " / " + lastHeader);
            try (GpuScheduler fresh = open(dir)) {
                assertEquals(expected, live(fresh), "a fresh process sees exactly the acknowledged state");
            }
        } finally {
            scheds.forEach(GpuScheduler::close);
            if (old == null) {
                System.clearProperty("gpusched.ledger.compactBytes");
            } else {
                System.setProperty("gpusched.ledger.compactBytes", old);
            }
        }
    }

    @Test
    void refreshGivesEachForeignChangeToListenersExactlyOnce() throws Exception {
        Path dir = tmp.resolve("events");
        Map<String, Integer> allocated = new ConcurrentHashMap<>();
        Map<String, Integer> released = new ConcurrentHashMap<>();
        GpuScheduler a = GpuScheduler.builder()
                .inventory(NodeDescriptions.profile("pcie-4xa10"))
                .stateDir(dir)
                .maintenanceInterval(Duration.ZERO)
                .listener(e -> {
                    if (e.allocationId().isEmpty()) {
                        return;
                    }
                    if (e.type() == AllocationEvent.Type.ALLOCATED) {
                        allocated.merge(e.allocationId().get(), 1, Integer::sum);
                    } else if (e.type() == AllocationEvent.Type.RELEASED) {
                        released.merge(e.allocationId().get(), 1, Integer::sum);
                    }
                })
                .build();
        try (a; GpuScheduler b = open(dir)) {
            CountDownLatch stop = new CountDownLatch(1);
            List<Thread> readers = new ArrayList<>();
            List<Throwable> errors = new CopyOnWriteArrayList<>();
            for (int i = 0; i < 3; i++) {
                final int k = i;
                Thread t = new Thread(() -> {
                    try {
                        while (stop.getCount() > 0) {
                            if (k == 0) {
                                a.refresh();
                            } else if (k == 1) {
                                a.allocations();
                            } else {
                                a.status();
                            }
                        }
                    } catch (Throwable e) {
                        errors.add(e);
                    }
                });
                readers.add(t);
                t.start();
            }
            Set<String> bAllocated = new HashSet<>();
            Set<String> bReleased = new HashSet<>();
            for (int i = 0; i < 60; i++) {
                Allocation x = b.allocate(one());
                bAllocated.add(x.id());
                if (i % 3 != 0) {
                    b.release(x.id());
                    bReleased.add(x.id());
                }
                if (b.allocations().size() == 4) {
                    for (Allocation y : b.allocations()) {
                        b.release(y.id());
                        bReleased.add(y.id());
                    }
                }
            }
            stop.countDown();
            for (Thread t : readers) {
                t.join();
            }
            a.refresh();
            assertEquals(List.of(), errors);
            Map<String, Integer> expectA = new TreeMap<>();
            bAllocated.forEach(id -> expectA.put(id, 1));
            Map<String, Integer> expectR = new TreeMap<>();
            bReleased.forEach(id -> expectR.put(id, 1));
            assertEquals(expectA, new TreeMap<>(allocated), "ALLOCATED once per foreign allocation");
            assertEquals(expectR, new TreeMap<>(released), "RELEASED once per foreign release");
        }
    }

    @Test
    void releaseAndRenewWorkAcrossSchedulersAndTheOwnerSeesIt() throws Exception {
        Path dir = tmp.resolve("x");
        try (GpuScheduler a = open(dir); GpuScheduler b = open(dir)) {
            Allocation x = a.allocate(one());
            Allocation renewed = b.renew(x.id(), Duration.ofHours(2));
            assertEquals(x.deviceIndices(), renewed.deviceIndices());
            assertEquals(renewed.expiresAt(), a.allocation(x.id()).orElseThrow().expiresAt(),
                    "the owner sees the foreign renew");
            assertTrue(b.release(x.id()));
            assertTrue(a.allocation(x.id()).isEmpty());
            assertFalse(a.release(x.id()), "a second release by the owner reports it was already released");
            try {
                b.renew(x.id(), Duration.ofHours(1));
                fail("renewed a released allocation");
            } catch (GpuAllocationException e) {
                assertEquals(GpuAllocationException.Reason.UNKNOWN_ALLOCATION, e.reason());
            }
        }
    }

    @Test
    void aWaiterInOneSchedulerWakesWhenAnotherReleases() throws Exception {
        Path dir = tmp.resolve("wait");
        try (GpuScheduler a = open(dir); GpuScheduler b = open(dir)) {
            List<Allocation> all = new ArrayList<>();
            for (int i = 0; i < 4; i++) {
                all.add(a.allocate(one()));
            }
            AtomicReference<Object> got = new AtomicReference<>();
            CountDownLatch waiting = new CountDownLatch(1);
            Thread t = new Thread(() -> {
                try {
                    waiting.countDown();
                    got.set(b.allocate(one(), Duration.ofSeconds(60)));
                } catch (Throwable e) {
                    got.set(e);
                }
            });
            t.start();
            waiting.await();
            a.release(all.get(2).id());
            t.join();
            assertTrue(got.get() instanceof Allocation, "the waiter got the released device: " + got.get());
            assertEquals(all.get(2).deviceIndices(), ((Allocation) got.get()).deviceIndices());
        }
    }
}
