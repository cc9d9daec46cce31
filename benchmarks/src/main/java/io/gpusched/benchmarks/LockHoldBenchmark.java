package io.gpusched.benchmarks;

import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationStrategies;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.PcieLevel;
import io.gpusched.core.sim.SimulatedGpuInventory;
import java.lang.reflect.Field;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Issue 23: how long one {@code allocate} holds the scheduler's lock (the ledger's {@code ReentrantLock}, which every
 * other allocate, release and renew of the process waits for), measured by swapping that lock for one that times each
 * outermost hold. In-memory scheduler, one thread, the topology strategy; per node: warm-up, then 1,000 allocate +
 * release rounds; prints median, p99 and max of the hold during allocate and of allocate's own time. Uses only public
 * API and reflection on the fields {@code DefaultGpuScheduler.ledger} and {@code Ledger.lock}, so the same source can
 * be compiled against an older gpu-core (the decide-under-lock baseline) and run there. Run:
 * <pre>
 * java -cp benchmarks/target/benchmarks.jar io.gpusched.benchmarks.LockHoldBenchmark
 * </pre>
 */
public final class LockHoldBenchmark {

    private LockHoldBenchmark() {
    }

    /** A lock that records how long each outermost hold lasted (single-threaded use: no waiting on conditions). */
    static final class TimedLock extends ReentrantLock {
        private static final long serialVersionUID = 1L;
        private transient long since;
        transient long total;

        @Override
        public void lock() {
            super.lock();
            started();
        }

        @Override
        public void lockInterruptibly() throws InterruptedException {
            super.lockInterruptibly();
            started();
        }

        @Override
        public boolean tryLock() {
            boolean got = super.tryLock();
            if (got) {
                started();
            }
            return got;
        }

        @Override
        public boolean tryLock(long timeout, TimeUnit unit) throws InterruptedException {
            boolean got = super.tryLock(timeout, unit);
            if (got) {
                started();
            }
            return got;
        }

        private void started() {
            if (getHoldCount() == 1) {
                since = System.nanoTime();
            }
        }

        @Override
        public void unlock() {
            if (getHoldCount() == 1) {
                total += System.nanoTime() - since;
            }
            super.unlock();
        }
    }

    /** An irregular node: 1-4 NVLinks on a third of the pairs, random PCIe levels (fixed seed). */
    static GpuInventory irregular(int n) {
        Random r = new Random(1000L * n);
        SimulatedGpuInventory.Builder b = SimulatedGpuInventory.builder("irregular-" + n);
        for (int i = 0; i < n; i++) {
            b.device(GpuDevice.builder().index(i).uuid("GPU-irr-" + n + "-" + i).vendor(GpuVendor.NVIDIA).name("X")
                    .memory(MemorySize.ofGibibytes(80)).pciBusId(String.format("00000000:%02x:00.0", i % 256))
                    .numaNode(i * 2 / n).minor(i).build());
        }
        for (int i = 0; i < n; i++) {
            for (int j = i + 1; j < n; j++) {
                if (r.nextInt(3) == 0) {
                    b.links(i, j, 1 + r.nextInt(4));
                }
                b.pcie(i, j, PcieLevel.values()[1 + r.nextInt(PcieLevel.values().length - 1)]);
            }
        }
        return b.build();
    }

    /** @return {hold median, hold p99, hold max, allocate median, allocate p99} in microseconds */
    static double[] measure(GpuInventory inv, int held, int k, int rounds) throws Exception {
        GpuScheduler s = GpuScheduler.builder().inventory(inv).strategy(AllocationStrategies.topologyAware())
                .auditLogging(false).maintenanceInterval(Duration.ZERO).build();
        Field lf = s.getClass().getDeclaredField("ledger");
        lf.setAccessible(true);
        Object ledger = lf.get(s);
        Field lockField = ledger.getClass().getDeclaredField("lock");
        lockField.setAccessible(true);
        TimedLock lock = new TimedLock();
        lockField.set(ledger, lock);
        for (int i = 0; i < held; i++) {
            s.allocate(GpuRequest.builder().count(1 + i % 3).build()); // an irregular state: some GPUs held
        }
        long[] hold = new long[rounds];
        long[] took = new long[rounds];
        for (int i = -rounds / 2; i < rounds; i++) {
            long before = lock.total;
            long t0 = System.nanoTime();
            Allocation a = s.allocate(GpuRequest.builder().count(k).build());
            long t1 = System.nanoTime();
            if (i >= 0) {
                hold[i] = lock.total - before;
                took[i] = t1 - t0;
            }
            s.release(a.id());
        }
        s.close();
        Arrays.sort(hold);
        Arrays.sort(took);
        return new double[]{hold[rounds / 2] / 1e3, hold[rounds * 99 / 100] / 1e3, hold[rounds - 1] / 1e3,
            took[rounds / 2] / 1e3, took[rounds * 99 / 100] / 1e3};
    }

    /** Prints one line per node and request size. */
    public static void main(String[] args) throws Exception {
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 1000;
        List<Object[]> cases = new ArrayList<>();
        cases.add(new Object[]{"dgx-h100", Nodes.named("dgx-h100"), 0, 2});
        cases.add(new Object[]{"parts-64", Nodes.named("parts-64"), 8, 8});
        GpuInventory irr = irregular(256);
        cases.add(new Object[]{"irregular-256", irr, 24, 16});
        cases.add(new Object[]{"irregular-256", irr, 24, 64});
        for (Object[] c : cases) {
            double[] m = measure((GpuInventory) c[1], (Integer) c[2], (Integer) c[3], rounds);
            System.out.printf(Locale.ROOT, "%-14s k=%-3d hold median %9.1f us  p99 %9.1f us  max %9.1f us | allocate"
                    + " median %9.1f us  p99 %9.1f us%n", c[0], c[3], m[0], m[1], m[2], m[3], m[4]);
        }
    }
}
