package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.strategy.TopologyAwareStrategy;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Issue 23: the strategy runs on a snapshot without the scheduler's or the node's lock; the commit re-validates the
 * pick on the caught-up state. Judged by ordering (what completed while a search was still running) and by histories
 * checked here ({@link LedgerHistory} reads the ledger file; an in-memory history is replayed from the events), never
 * by timing and never by asking the scheduler whether it did right.
 */
class DecideOutsideTheLockTest {

    /** A strategy that, on the request owned by {@code victim}, runs {@code during} before it answers. */
    static final class Interfering implements AllocationStrategy {
        final AllocationStrategy delegate = new TopologyAwareStrategy();
        final AtomicReference<Runnable> during = new AtomicReference<>();
        final AtomicReference<List<Integer>> firstPick = new AtomicReference<>();
        final AtomicInteger calls = new AtomicInteger();

        @Override
        public String name() {
            return "interfering";
        }

        @Override
        public List<Integer> select(GpuRequest request, SchedulingView view) {
            return choose(request, view).devices();
        }

        @Override
        public Choice choose(GpuRequest request, SchedulingView view) {
            Choice c = delegate.choose(request, view);
            if (request.owner().equals(Optional.of("victim"))) {
                calls.incrementAndGet();
                Runnable r = during.getAndSet(null);
                if (r != null) {
                    firstPick.set(List.copyOf(c.devices()));
                    r.run();
                }
            }
            return c;
        }
    }

    /** Replays ALLOCATED/RELEASED events: a device is never given to a second live allocation. */
    static final class History implements AllocationListener {
        final List<AllocationEvent> events = new CopyOnWriteArrayList<>();

        @Override
        public void onEvent(AllocationEvent e) {
            events.add(e);
        }

        List<String> violations() {
            Map<String, String> holder = new HashMap<>();
            Map<String, List<String>> devicesOf = new HashMap<>();
            List<String> out = new ArrayList<>();
            for (AllocationEvent e : events) {
                String id = e.allocationId().orElse("?");
                if (e.type() == AllocationEvent.Type.ALLOCATED) {
                    for (String u : e.deviceUuids()) {
                        String before = holder.putIfAbsent(u, id);
                        if (before != null) {
                            out.add(u + " given to " + id + " while " + before + " held it");
                        }
                    }
                    devicesOf.put(id, e.deviceUuids());
                } else if (e.type() == AllocationEvent.Type.RELEASED || e.type() == AllocationEvent.Type.RECLAIMED) {
                    for (String u : devicesOf.getOrDefault(id, List.of())) {
                        holder.remove(u, id);
                    }
                }
            }
            return out;
        }
    }

    /**
     * The victim's strategy picks its GPUs; before it answers, another thread (in memory) or another scheduler on the
     * same state directory (durable: another process's view) takes exactly those GPUs by index. The concurrent change
     * must be able to complete while the strategy runs (it would wait for the lock forever otherwise: the 30 s wait
     * fails the test), and the victim's commit must notice that its snapshot is out of date and place it elsewhere.
     */
    @ParameterizedTest
    @ValueSource(booleans = {false, true})
    @Timeout(value = 2, unit = TimeUnit.MINUTES)
    void aSnapshotInvalidatedByAConcurrentChangeNeverCommitsAHeldDevice(boolean durable, @TempDir Path tmp)
            throws Exception {
        Interfering strategy = new Interfering();
        History history = new History();
        GpuInventory inv = GpuInventories.simulated("dgx-h100");
        GpuScheduler.Builder b = GpuScheduler.builder().inventory(inv).strategy(strategy).listener(history)
                .auditLogging(false).maintenanceInterval(Duration.ZERO);
        if (durable) {
            b.stateDir(tmp.resolve("state"));
        }
        try (GpuScheduler victim = b.build();
             GpuScheduler other = durable ? GpuScheduler.builder().inventory(GpuInventories.simulated("dgx-h100"))
                     .stateDir(tmp.resolve("state")).auditLogging(false).maintenanceInterval(Duration.ZERO).build()
                     : null) {
            GpuScheduler thiefSide = durable ? other : victim;
            AtomicReference<Allocation> stolen = new AtomicReference<>();
            AtomicReference<Throwable> thiefFailed = new AtomicReference<>();
            strategy.during.set(() -> {
                Thread t = new Thread(() -> {
                    try {
                        stolen.set(thiefSide.allocate(GpuRequest.builder().deviceIndices(strategy.firstPick.get())
                                .owner("thief").build()));
                    } catch (Throwable e) {
                        thiefFailed.set(e);
                    }
                });
                t.start();
                try {
                    t.join(30_000);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
            Allocation got = victim.allocate(GpuRequest.builder().count(4).owner("victim").build());

            assertThat(thiefFailed.get()).as("the concurrent allocation failed").isNull();
            assertThat(stolen.get()).as("the concurrent allocation completed while the strategy ran").isNotNull();
            assertThat(stolen.get().deviceIndices()).containsExactlyInAnyOrderElementsOf(strategy.firstPick.get());
            assertThat(got.deviceIndices()).as("the victim's GPUs").doesNotContainAnyElementsOf(
                    stolen.get().deviceIndices()).hasSize(4);
            assertThat(strategy.calls.get()).as("decided again after the snapshot went stale")
                    .isGreaterThanOrEqualTo(2);
            assertThat(((DefaultGpuScheduler) victim).staleSnapshots()).isGreaterThanOrEqualTo(1);
            if (durable) {
                LedgerHistory h = LedgerHistory.check(tmp.resolve("state").resolve("ledger"),
                        MultiProcessLedgerTest.memory());
                assertThat(h.violations).isEmpty();
                assertThat(h.allocatedEver).contains(got.id(), stolen.get().id());
            } else {
                assertThat(history.violations()).isEmpty();
                assertThat(history.events).extracting(AllocationEvent::type)
                        .containsOnly(AllocationEvent.Type.ALLOCATED);
            }
        }
    }

    /** Blocks the request owned by {@code huge} inside the strategy until {@link #release} opens (or 3 minutes). */
    static final class SlowSearch implements AllocationStrategy {
        final AllocationStrategy delegate = new TopologyAwareStrategy();
        final CountDownLatch started = new CountDownLatch(1);
        final CountDownLatch release = new CountDownLatch(1);
        volatile boolean releasedInTime;

        @Override
        public String name() {
            return "slow-search";
        }

        @Override
        public List<Integer> select(GpuRequest request, SchedulingView view) {
            return choose(request, view).devices();
        }

        @Override
        public Choice choose(GpuRequest request, SchedulingView view) {
            if (request.owner().equals(Optional.of("huge")) && started.getCount() > 0) {
                started.countDown();
                try {
                    releasedInTime = release.await(3, TimeUnit.MINUTES);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            return delegate.choose(request, view);
        }
    }

    /**
     * One search that does not end until everything else has: 8 threads of this process and 2 child JVMs
     * ({@link LedgerChild}) allocate and release on the same node ledger meanwhile. Every one of them must finish while
     * the search is still running (ordering: their completions are numbered before the search is let go), and the
     * ledger's history must show no device held twice.
     */
    @Test
    @Timeout(value = 8, unit = TimeUnit.MINUTES)
    void othersCompleteWithoutWaitingForALongSearch(@TempDir Path tmp) throws Exception {
        Path dir = tmp.resolve("state");
        SlowSearch strategy = new SlowSearch();
        AtomicInteger order = new AtomicInteger();
        List<Integer> workerDone = new CopyOnWriteArrayList<>();
        Set<String> acknowledged = Collections.synchronizedSet(new HashSet<>());
        try (GpuScheduler s = GpuScheduler.builder().inventory(GpuInventories.simulated("dgx-h100")).stateDir(dir)
                .strategy(strategy).auditLogging(false).maintenanceInterval(Duration.ZERO).build()) {
            AtomicReference<Allocation> huge = new AtomicReference<>();
            AtomicInteger hugeDone = new AtomicInteger();
            Thread searcher = new Thread(() -> {
                huge.set(s.allocate(GpuRequest.builder().count(2).owner("huge").build()));
                hugeDone.set(order.incrementAndGet());
            });
            searcher.start();
            assertThat(strategy.started.await(60, TimeUnit.SECONDS)).as("the long search started").isTrue();

            List<Process> children = new ArrayList<>();
            for (int i = 0; i < 2; i++) {
                children.add(MultiProcessLedgerTest.child(dir, 300 + i, 150, tmp.resolve("c" + i + ".log"), null));
            }
            List<Thread> workers = new ArrayList<>();
            List<Throwable> failures = new CopyOnWriteArrayList<>();
            for (int w = 0; w < 8; w++) {
                int id = w;
                Thread t = new Thread(() -> {
                    try {
                        for (int i = 0; i < 40; i++) {
                            Optional<Allocation> a = s.tryAllocate(GpuRequest.builder().count(1 + (i + id) % 2)
                                    .owner("worker-" + id).build());
                            if (a.isPresent()) {
                                acknowledged.add(a.get().id());
                                s.release(a.get().id());
                            }
                        }
                        workerDone.add(order.incrementAndGet());
                    } catch (Throwable e) {
                        failures.add(e);
                    }
                });
                t.start();
                workers.add(t);
            }
            for (Thread t : workers) {
                t.join(120_000);
                assertThat(t.isAlive()).as("a worker still waits while the long search runs (it waits for the lock)")
                        .isFalse();
            }
            for (int i = 0; i < 2; i++) {
                assertThat(children.get(i).waitFor(120, TimeUnit.SECONDS))
                        .as("child %d finished while the long search runs", i).isTrue();
                assertThat(children.get(i).exitValue()).as("child %d: %s", i,
                        Files.readString(tmp.resolve("c" + i + ".log.out"))).isZero();
            }
            assertThat(hugeDone.get()).as("the long search is still running").isZero();
            // the children end holding up to 5 allocations each (some unbound, never reclaimed): give them back, so
            // that the search, let go now, finds GPUs free whatever the children's last steps were
            for (Allocation left : s.allocations()) {
                if (left.owner().orElse("").startsWith("child-")) {
                    s.release(left.id());
                }
            }
            strategy.release.countDown();
            searcher.join(60_000);

            assertThat(failures).isEmpty();
            assertThat(strategy.releasedInTime).isTrue();
            assertThat(huge.get()).isNotNull();
            assertThat(workerDone).hasSize(8).allSatisfy(n -> assertThat(n).isLessThan(hugeDone.get()));
            acknowledged.add(huge.get().id());
            for (int i = 0; i < 2; i++) {
                List<String> log = Files.readAllLines(tmp.resolve("c" + i + ".log"));
                assertThat(log).contains("DONE 150").noneMatch(l -> l.startsWith("ERR"));
                log.stream().filter(l -> l.startsWith("A ")).forEach(l -> acknowledged.add(l.split(" ")[1]));
            }
        }
        LedgerHistory h = LedgerHistory.check(dir.resolve("ledger"), MultiProcessLedgerTest.memory());
        assertThat(h.violations).isEmpty();
        assertThat(h.allocatedEver).containsAll(acknowledged);
        assertThat(acknowledged).as("the others did real work").hasSizeGreaterThan(100);
    }
}
