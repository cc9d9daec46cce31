package io.gpusched.benchmarks;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.LedgerStatistics;
import io.gpusched.core.MemorySize;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

/**
 * The node ledger's costs, measured in one run as ratios against baselines of the same run (a plain main harness,
 * not JMH: it needs child processes and forced writes on a real disk). Each measurement is repeated for
 * {@code rounds} rounds; the report gives the median and the range over the rounds.
 *
 * <pre>
 * java -cp ... io.gpusched.benchmarks.LedgerBenchmark durable DIR [rounds] [ops]   # 1: durable vs bare append+force,
 *                                                                              # 2: 8 threads vs 1
 * java -cp ... io.gpusched.benchmarks.LedgerBenchmark processes DIR [ops]         # 3: 4 processes contending
 * java -cp ... io.gpusched.benchmarks.LedgerBenchmark inmemory [rounds] [ops]     # 4: in-memory allocate+release
 * </pre>
 * DIR must be on a real disk (not tmpfs), writable by its owner only.
 */
public final class LedgerBenchmark {
    private LedgerBenchmark() {
    }

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "durable" -> durable(Path.of(args[1]), arg(args, 2, 5), arg(args, 3, 2000));
            case "processes" -> processes(Path.of(args[1]), arg(args, 2, 2000));
            case "child" -> child(Path.of(args[1]), arg(args, 2, 2000));
            case "inmemory" -> inMemory(arg(args, 1, 5), arg(args, 2, 2_000_000));
            default -> throw new IllegalArgumentException("durable | processes | inmemory, was " + args[0]);
        }
    }

    private static int arg(String[] a, int i, int d) {
        return a.length > i ? Integer.parseInt(a[i]) : d;
    }

    static GpuScheduler durableScheduler(Path dir) {
        return GpuScheduler.builder().inventory(GpuInventories.simulated("dgx-h100")).stateDir(dir)
                .auditLogging(false).maintenanceInterval(Duration.ZERO).build();
    }

    static GpuRequest request() {
        return GpuRequest.builder().shared(MemorySize.ofMebibytes(1)).owner("bench").build();
    }

    private static void durable(Path root, int rounds, int ops) throws Exception {
        double[] ratioBare = new double[rounds];
        double[] ratioThreads = new double[rounds];
        double[] single = new double[rounds];
        double[] eight = new double[rounds];
        double[] bare = new double[rounds];
        double[] batch = new double[rounds];
        double[] forceUs = new double[rounds];
        for (int r = 0; r < rounds; r++) {
            Path dir = root.resolve("d" + r);
            long bytesPerChange;
            double nsPerChange;
            try (GpuScheduler s = durableScheduler(dir)) {
                for (int i = 0; i < 200; i++) {
                    s.release(s.allocate(request()).id());
                }
                long size0 = Files.size(dir.resolve("ledger"));
                long t0 = System.nanoTime();
                for (int i = 0; i < ops; i++) {
                    s.release(s.allocate(request()).id());
                }
                long t = System.nanoTime() - t0;
                bytesPerChange = (Files.size(dir.resolve("ledger")) - size0) / (2L * ops);
                nsPerChange = t / (2.0 * ops);
                single[r] = 2.0 * ops / (t / 1e9);
            }
            bare[r] = bareAppend(root.resolve("bare" + r), (int) bytesPerChange, 2 * ops);
            ratioBare[r] = nsPerChange / bare[r];
            Path dir8 = root.resolve("t" + r);
            try (GpuScheduler s = durableScheduler(dir8)) {
                ExecutorService pool = Executors.newFixedThreadPool(8);
                CountDownLatch go = new CountDownLatch(1);
                List<Future<?>> fs = new ArrayList<>();
                int per = ops / 8 * 4;
                for (int t = 0; t < 8; t++) {
                    fs.add(pool.submit(() -> {
                        go.await();
                        for (int i = 0; i < per; i++) {
                            s.release(s.allocate(request()).id());
                        }
                        return null;
                    }));
                }
                long t0 = System.nanoTime();
                go.countDown();
                for (Future<?> f : fs) {
                    f.get();
                }
                long t = System.nanoTime() - t0;
                pool.shutdown();
                eight[r] = 2.0 * per * 8 / (t / 1e9);
                LedgerStatistics st = s.ledgerStatistics().orElseThrow();
                batch[r] = st.records() / (double) Math.max(1, st.forces());
                forceUs[r] = st.forceNanos() / 1e3 / Math.max(1, st.forces());
            }
            ratioThreads[r] = eight[r] / single[r];
            System.out.printf(Locale.ROOT, "round %d: record %d B, durable change %.1f us, bare append+force %.1f us"
                    + " (x%.2f); 1 thread %.0f changes/s, 8 threads %.0f changes/s (x%.2f), %.1f records"
                    + " per force, force"
                    + " %.0f us%n", r, bytesPerChange, nsPerChange / 1e3, bare[r] / 1e3, ratioBare[r],
                    single[r],
                    eight[r], ratioThreads[r], batch[r], forceUs[r]);
        }
        System.out.println("durable change / bare append+force: " + summary(ratioBare));
        System.out.println("8 threads / 1 thread throughput:     " + summary(ratioThreads));
        System.out.println("8 threads: records per force " + summary(batch) + "; us per force " + summary(forceUs));
        System.out.println("1 thread changes/s: " + summary(single) + "; 8 threads changes/s: " + summary(eight));
    }

    /** @return ns per append of one line of {@code size} bytes plus force(false), the ledger's own write pattern */
    static double bareAppend(Path file, int size, int n) throws IOException {
        byte[] line = new byte[Math.max(1, size)];
        Arrays.fill(line, (byte) 'x');
        line[line.length - 1] = '\n';
        try (FileChannel c = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                StandardOpenOption.READ)) {
            long pos = 0;
            for (int i = 0; i < 200; i++) {
                pos += c.write(ByteBuffer.wrap(line), pos);
                c.force(false);
            }
            long t0 = System.nanoTime();
            for (int i = 0; i < n; i++) {
                pos += c.write(ByteBuffer.wrap(line), pos);
                c.force(false);
            }
            return (System.nanoTime() - t0) / (double) n;
        }
    }

    private static void processes(Path root, int ops) throws Exception {
        Path dir = root.resolve("p");
        durableScheduler(dir).close();
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        List<Process> ps = new ArrayList<>();
        long t0 = System.nanoTime();
        for (int i = 0; i < 4; i++) {
            ps.add(new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"),
                    LedgerBenchmark.class.getName(), "child", dir.toString(), String.valueOf(ops))
                    .redirectErrorStream(true).start());
        }
        for (int i = 0; i < 4; i++) {
            String out = new String(ps.get(i).getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (ps.get(i).waitFor() != 0) {
                throw new IllegalStateException("child " + i + " failed: " + out);
            }
            System.out.print("process " + i + ": " + out);
        }
        System.out.printf(Locale.ROOT, "4 processes: %d allocate+release pairs in %.1f s wall (JVM starts included)%n",
                4 * ops, (System.nanoTime() - t0) / 1e9);
    }

    private static void child(Path dir, int ops) {
        try (GpuScheduler s = durableScheduler(dir)) {
            for (int i = 0; i < 100; i++) {
                s.release(s.allocate(request()).id());
            }
            long[] lat = new long[ops];
            long t0 = System.nanoTime();
            for (int i = 0; i < ops; i++) {
                long a = System.nanoTime();
                Allocation x = s.allocate(request());
                s.release(x.id());
                lat[i] = System.nanoTime() - a;
            }
            double secs = (System.nanoTime() - t0) / 1e9;
            Arrays.sort(lat);
            System.out.printf(Locale.ROOT, "%.0f allocate+release pairs/s, p50 %.2f ms, p99 %.2f ms, max %.2f ms%n",
                    ops / secs, lat[ops / 2] / 1e6, lat[(int) (ops * 0.99)] / 1e6, lat[ops - 1] / 1e6);
        }
    }

    private static void inMemory(int rounds, int ops) {
        double[] ns = new double[rounds];
        GpuInventory inv = GpuInventories.simulated("dgx-h100");
        try (GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).build()) {
            GpuRequest req = GpuRequest.builder().count(2).build();
            for (int i = 0; i < ops; i++) {
                s.release(s.allocate(req).id());
            }
            for (int r = 0; r < rounds; r++) {
                long t0 = System.nanoTime();
                for (int i = 0; i < ops; i++) {
                    s.release(s.allocate(req).id());
                }
                ns[r] = (System.nanoTime() - t0) / (double) ops;
            }
        }
        System.out.println("in-memory allocate+release (2 of 8 GPUs, packing), ns/op: " + summary(ns));
    }

    static String summary(double[] v) {
        double[] s = v.clone();
        Arrays.sort(s);
        return String.format(Locale.ROOT, "median %.2f (min %.2f, max %.2f, n=%d)", s[s.length / 2], s[0],
                s[s.length - 1], s.length);
    }
}
