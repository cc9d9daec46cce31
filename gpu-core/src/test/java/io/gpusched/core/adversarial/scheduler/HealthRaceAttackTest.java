package io.gpusched.core.adversarial.scheduler;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationStrategies;
import io.gpusched.core.AllocationStrategy;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuSample;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.MemorySize;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Health changes and metric updates racing many allocating and releasing threads, on the cached device snapshot. Two
 * independent checkers over what allocate() returned and release() acknowledged:
 * <ul>
 *   <li>never a sick GPU: a GPU whose LOST/UNHEALTHY listener call had returned before an allocate() began, and whose
 *   recovery had not begun before it returned, is in no allocation it grants (a total order from one counter);</li>
 *   <li>never held twice: a grant never overlaps a holding the checker still records (holdings leave the checker
 *   before release() is called, so the checker never holds more than the scheduler); shared reservations never
 *   exceed a GPU's memory.</li>
 * </ul>
 */
@Tag("adversarial")
class HealthRaceAttackTest {
    private static final int GPUS = 12;
    private static final MemorySize MEM = MemorySize.ofGibibytes(80);

    @TempDir
    Path tmp;

    record Grant(long start, long end, Allocation allocation) {
    }

    @Test
    void inMemory() throws Exception {
        race(null, 4, 3000, AllocationStrategies.topologyAware());
    }

    @Test
    void inMemoryPacking() throws Exception {
        race(null, 4, 2000, AllocationStrategies.packing());
    }

    @Test
    void withNodeLedger() throws Exception {
        race(tmp.resolve("state"), 4, 250, AllocationStrategies.topologyAware());
    }

    private void race(Path stateDir, int threads, int opsPerThread, AllocationStrategy strategy) throws Exception {
        Node node = Node.uniform(GPUS);
        GpuScheduler.Builder b = GpuScheduler.builder().inventory(node).strategy(strategy).auditLogging(false)
                .maintenanceInterval(Duration.ZERO);
        if (stateDir != null) {
            b.stateDir(stateDir);
        }
        AtomicLong order = new AtomicLong();
        // per device: intervals [sickMark, recoverMark) (recoverMark MAX while still sick)
        List<List<long[]>> sick = new ArrayList<>();
        for (int i = 0; i < GPUS; i++) {
            sick.add(new java.util.concurrent.CopyOnWriteArrayList<>());
        }
        ConcurrentLinkedQueue<Grant> grants = new ConcurrentLinkedQueue<>();
        ConcurrentLinkedQueue<String> violations = new ConcurrentLinkedQueue<>();
        Map<String, String> exclusive = new ConcurrentHashMap<>();
        AtomicLongArray sharedReserved = new AtomicLongArray(GPUS);
        AtomicLongArray sharedCount = new AtomicLongArray(GPUS);
        AtomicBoolean done = new AtomicBoolean();
        List<Throwable> errors = new java.util.concurrent.CopyOnWriteArrayList<>();
        try (GpuScheduler s = b.build()) {
            CountDownLatch go = new CountDownLatch(1);
            List<Thread> workers = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                long seed = 1000 + t;
                workers.add(new Thread(() -> {
                    Random rnd = new Random(seed);
                    List<Allocation> mine = new ArrayList<>();
                    try {
                        go.await();
                        for (int op = 0; op < opsPerThread; op++) {
                            if (!mine.isEmpty() && (mine.size() > 2 || rnd.nextBoolean())) {
                                Allocation a = mine.remove(rnd.nextInt(mine.size()));
                                forget(a, exclusive, sharedReserved, sharedCount);
                                assertThat(s.release(a.id())).as("release of %s acknowledged", a.id()).isTrue();
                                continue;
                            }
                            GpuRequest r = request(rnd);
                            long start = order.incrementAndGet();
                            Allocation a;
                            try {
                                a = s.allocate(r);
                            } catch (GpuAllocationException e) {
                                continue;
                            }
                            long end = order.incrementAndGet();
                            grants.add(new Grant(start, end, a));
                            record(a, exclusive, sharedReserved, sharedCount, violations);
                            mine.add(a);
                        }
                        for (Allocation a : mine) {
                            forget(a, exclusive, sharedReserved, sharedCount);
                            s.release(a.id());
                        }
                    } catch (Throwable e) {
                        errors.add(e);
                    }
                }, "hp-alloc-" + t));
            }
            Thread flipper = new Thread(() -> {
                Random rnd = new Random(7);
                long[][] open = new long[GPUS][];
                try {
                    go.await();
                    while (!done.get()) {
                        int d = rnd.nextInt(GPUS);
                        if (open[d] == null) {
                            node.change(d,
                                    rnd.nextBoolean() ? GpuHealth.lost("XID 79") : GpuHealth.unhealthy("XID 48"));
                            open[d] = new long[]{order.incrementAndGet(), Long.MAX_VALUE};
                            sick.get(d).add(open[d]);
                        } else {
                            open[d][1] = order.incrementAndGet(); // recovery begins now (before the listener call)
                            sick.get(d).set(sick.get(d).size() - 1, open[d].clone());
                            open[d] = null;
                            node.change(d, GpuHealth.HEALTHY);
                        }
                        Thread.onSpinWait();
                    }
                } catch (Throwable e) {
                    errors.add(e);
                }
            }, "hp-flipper");
            Thread metrics = new Thread(() -> {
                Random rnd = new Random(9);
                try {
                    go.await();
                    while (!done.get()) {
                        List<GpuMetrics> ms = new ArrayList<>();
                        for (int i = 0; i < GPUS; i++) {
                            ms.add(GpuMetrics.of(i, rnd.nextInt(100), MemorySize.ofGibibytes(rnd.nextInt(80)),
                                    30 + rnd.nextInt(60), 100 + rnd.nextInt(300), Instant.now()));
                        }
                        s.updateMetrics(new GpuSample(Instant.now(), ms));
                        // readers of the cached snapshot see whole, consistent states
                        s.devices().forEach(st -> {
                            if (st.exclusiveHolder().isPresent() && st.sharedHolders() > 0) {
                                violations.add("snapshot: GPU " + st.index() + " exclusive and shared");
                            }
                        });
                        s.status();
                    }
                } catch (Throwable e) {
                    errors.add(e);
                }
            }, "hp-metrics");
            workers.forEach(Thread::start);
            flipper.start();
            metrics.start();
            go.countDown();
            for (Thread w : workers) {
                w.join(TimeUnit.MINUTES.toMillis(2));
                assertThat(w.isAlive()).as("worker %s finished", w.getName()).isFalse();
            }
            done.set(true);
            flipper.join();
            metrics.join();
            assertThat(errors).isEmpty();
            assertThat(violations).isEmpty();
            // the never-a-sick-GPU checker, over every grant
            for (Grant g : grants) {
                for (int idx : g.allocation().deviceIndices()) {
                    for (long[] iv : sick.get(idx)) {
                        if (iv[0] <= g.start() && iv[1] >= g.end()) {
                            violations.add(g.allocation().id() + " got GPU " + idx + ", sick from " + iv[0]
                                    + " to " + iv[1] + " while the allocate ran in [" + g.start() + ", " + g.end()
                                    + "]");
                        }
                    }
                }
            }
            assertThat(violations).isEmpty();
            assertThat(grants.size()).as("grants").isGreaterThan(threads * opsPerThread / 8);
            assertThat(s.allocations()).isEmpty();
            s.devices().forEach(st -> assertThat(st.isIdle()).as("GPU %d idle at the end", st.index()).isTrue());
        }
    }

    private static GpuRequest request(Random rnd) {
        int k = rnd.nextInt(10);
        if (k == 0) {
            return GpuRequest.builder().deviceIndices(rnd.nextInt(GPUS)).build();
        }
        if (k == 1) {
            return GpuRequest.builder().count(1).shared(MemorySize.ofGibibytes(1L << rnd.nextInt(7))).build();
        }
        if (k == 2) {
            return GpuRequest.builder().count(2).requiredDevices(rnd.nextInt(GPUS)).build();
        }
        return GpuRequest.builder().count(1 + rnd.nextInt(3)).build();
    }

    private static void record(Allocation a, Map<String, String> exclusive, AtomicLongArray reserved,
            AtomicLongArray count, ConcurrentLinkedQueue<String> violations) {
        if (a.deviceIndices().size() != new java.util.HashSet<>(a.deviceIndices()).size()) {
            violations.add(a.id() + " holds a device twice: " + a.deviceIndices());
        }
        for (int i = 0; i < a.devices().size(); i++) {
            int idx = a.devices().get(i).index();
            String uuid = a.devices().get(i).uuid();
            if (a.sharedMemory().isEmpty()) {
                String prev = exclusive.putIfAbsent(uuid, a.id());
                if (prev != null) {
                    violations.add(a.id() + " got GPU " + idx + " still held by " + prev);
                }
                if (count.get(idx) > 0) {
                    violations.add(a.id() + " got GPU " + idx + " exclusively while it is shared");
                }
            } else {
                count.incrementAndGet(idx);
                long now = reserved.addAndGet(idx, a.sharedMemory().get().bytes());
                if (exclusive.containsKey(uuid)) {
                    violations.add(a.id() + " shares GPU " + idx + " held exclusively by " + exclusive.get(uuid));
                }
                if (now > MEM.bytes()) {
                    violations.add("GPU " + idx + " oversubscribed: " + now + " B reserved");
                }
            }
        }
    }

    private static void forget(Allocation a, Map<String, String> exclusive, AtomicLongArray reserved,
            AtomicLongArray count) {
        for (int i = 0; i < a.devices().size(); i++) {
            int idx = a.devices().get(i).index();
            if (a.sharedMemory().isEmpty()) {
                exclusive.remove(a.devices().get(i).uuid(), a.id());
            } else {
                reserved.addAndGet(idx, -a.sharedMemory().get().bytes());
                count.decrementAndGet(idx);
            }
        }
    }
}
