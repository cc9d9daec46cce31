package io.gpusched.benchmarks;

import io.gpusched.accounting.AccountingRecord;
import io.gpusched.accounting.AccountingRecord.DeviceUsage;
import io.gpusched.accounting.AccountingRecord.Interval;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.RecordCodec;
import io.gpusched.accounting.UsageFigures;
import io.gpusched.accounting.UsageReport;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.core.sim.UsageTrace;
import io.gpusched.nvml.FakeNvml;
import io.gpusched.nvml.NvmlInventory;
import io.gpusched.nvml.NvmlOptions;
import io.gpusched.server.ConsoleServer;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDate;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.Random;
import java.util.zip.CRC32C;

/**
 * Accounting's costs (issue 34), a plain main harness measuring ratios against a baseline of the same run.
 *
 * <pre>
 * java -cp ... io.gpusched.benchmarks.AccountingBenchmark sampling DIR [rounds] [sweeps] [checkpoint seconds]
 *     CPU time per GPU and sweep of the console's own tick with accounting off, and of the same tick with the console
 *     as the node's accounting sampler, at 8 and 64 GPUs (a sweep a second: CPU time per GPU per second) (its
 *     checkpoint every gpu.accounting.checkpoint, 60 s unless given)
 * java -cp ... io.gpusched.benchmarks.AccountingBenchmark sampling-nvml DIR [rounds] [sweeps] [checkpoint seconds]
 *     the same at 8 GPUs through the NVML backend, against the fake libnvidia-ml.so.1 (compiled here with gcc against
 *     the real nvml.h; its calls do nothing but copy figures): the console's sweep as on an NVIDIA node, less the
 *     driver's own time
 * java -cp ... io.gpusched.benchmarks.AccountingBenchmark report DIR [allocations...]
 *     writes a year of a busy node's records (compacted, as the sampler leaves them), then times the report over the
 *     year by owner and by allocation and records the heap it needed, for each number of allocations given
 * </pre>
 */
public final class AccountingBenchmark {
    private AccountingBenchmark() {
    }

    public static void main(String[] args) throws Exception {
        Files.createDirectories(Path.of(args[1])); // its measurements' state directories are made under it
        switch (args[0]) {
            case "sampling", "sampling-nvml" -> sampling(Path.of(args[1]), args[0].equals("sampling-nvml"),
                    arg(args, 2, 5), arg(args, 3, 2000), args.length > 4 ? Duration.ofSeconds(Long.parseLong(args[4]))
                            : AccountingSettings.defaults().checkpoint());
            case "report" -> {
                List<Integer> sizes = new ArrayList<>();
                for (int i = 2; i < args.length; i++) {
                    sizes.add(Integer.parseInt(args[i]));
                }
                report(Path.of(args[1]), sizes.isEmpty() ? List.of(10_000, 100_000, 1_000_000) : sizes);
            }
            default -> throw new IllegalArgumentException("sampling | sampling-nvml | report, was " + args[0]);
        }
    }

    private static int arg(String[] a, int i, int d) {
        return a.length > i ? Integer.parseInt(a[i]) : d;
    }

    /** A clock moved by hand. */
    static final class StepClock extends Clock {
        volatile Instant now = Instant.parse("2026-06-01T00:00:00Z");

        @Override
        public ZoneId getZone() {
            return ZoneOffset.UTC;
        }

        @Override
        public Clock withZone(ZoneId zone) {
            return this;
        }

        @Override
        public Instant instant() {
            return now;
        }
    }

    /** A node of n GPUs, each running a trace with an energy counter; a quarter of them shared by two jobs. */
    static SimulatedGpuInventory node(int n, Clock clock) {
        SimulatedGpuInventory.Builder b = SimulatedGpuInventory.builder("bench-" + n).clock(clock).energyCounters(true);
        for (int i = 0; i < n; i++) {
            b.device(GpuDevice.builder().index(i).uuid("GPU-bench-" + i).vendor(GpuVendor.NVIDIA)
                    .name("NVIDIA H100 80GB HBM3").memory(MemorySize.ofGibibytes(80))
                    .pciBusId(String.format("00000000:%02X:00.0", i)).build());
        }
        SimulatedGpuInventory inv = b.build();
        for (int i = 0; i < n; i++) {
            if (i % 4 == 3) {
                inv.setProcessTraces(i, Map.of(pid(2 * i), UsageTrace.of(Duration.ofSeconds(10), 40, 20),
                        pid(2 * i + 1), UsageTrace.of(Duration.ofSeconds(10), 10, 30)));
            } else {
                inv.setTrace(i, UsageTrace.preset("training", MemorySize.ofGibibytes(80)));
            }
        }
        return inv;
    }

    /** Real processes (sleep) that the shared GPUs list: the sampler reads their start times as on a node. */
    private static final Map<Integer, Process> SLEEPERS = new HashMap<>();

    /** @return the pid of the {@code k}-th process a shared GPU lists, a real process started for the run */
    static synchronized int pid(int k) {
        Process p = SLEEPERS.get(k);
        if (p == null) {
            try {
                p = new ProcessBuilder("sleep", "86400").start();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            SLEEPERS.put(k, p);
            if (SLEEPERS.size() == 1) {
                Runtime.getRuntime().addShutdownHook(new Thread(() -> SLEEPERS.values().forEach(
                        Process::destroyForcibly)));
            }
        }
        return (int) p.pid();
    }

    /** The fake libnvidia-ml.so.1, built once per run; null until {@link #fakeNvml} is called. */
    private static Path fakeLibrary;

    /** Builds and binds the fake NVML (a DGX-1's 8 GPUs; GPUs 3 and 7 each list two compute processes). */
    static Path fakeNvml(Path dir) throws Exception {
        if (fakeLibrary == null) {
            FakeNvml.unavailableReason().ifPresent(r -> {
                throw new IllegalStateException("cannot build the fake NVML: " + r);
            });
            fakeLibrary = FakeNvml.build(Files.createTempDirectory(dir, "nvml"), false);
            FakeNvml.Control.bind(fakeLibrary);
            FakeNvml.Control.fake_nvml_reset();
            FakeNvml.Control.fake_nvml_set_scenario(FakeNvml.DGX1);
            for (int g = 0; g < 8; g++) {
                FakeNvml.Control.fake_nvml_set_energy(g, 1_000_000_000L * (g + 1));
                FakeNvml.Control.fake_nvml_set_device(g, g % 4 == 3 ? 50 : 90, 20L << 30, 250_000);
            }
            for (int g : new int[]{3, 7}) {
                FakeNvml.Control.fake_nvml_add_proc(g, -1, pid(2 * g), 6L << 30);
                FakeNvml.Control.fake_nvml_add_proc(g, -1, pid(2 * g + 1), 3L << 30);
            }
        }
        return fakeLibrary;
    }

    /** One console over its own node and state directory, ticked by hand (its tick thread off). */
    static final class Console implements AutoCloseable {
        final StepClock clock = new StepClock();
        final GpuInventory inv;
        final GpuScheduler scheduler;
        final ConsoleServer server;
        final Object watcher;
        final Method tick;

        Console(int n, Path state, boolean accounting, Duration checkpoint, boolean nvml)
                throws Exception {
            if (nvml) {
                Path sys = Files.createDirectories(state.resolve("sys"));
                inv = NvmlInventory.open(NvmlOptions.defaults().withLibrary(fakeNvml(state.getParent()))
                        .withSysfsRoot(sys).withHealthWatch(false, Duration.ofSeconds(1), Duration.ofHours(1))
                        .withClock(clock));
            } else {
                inv = node(n, clock);
            }
            scheduler = GpuScheduler.builder().inventory(inv).clock(clock).auditLogging(false)
                    .maintenanceInterval(Duration.ZERO).build();
            for (int i = 0; i < n; i++) {
                if (i % 4 == 3) {
                    for (int k = 0; k < 2; k++) {
                        scheduler.allocate(GpuRequest.builder().requiredDevices(i).shared(MemorySize.ofGibibytes(8))
                                .owner("u" + (i + k) % 7).build());
                    }
                } else {
                    scheduler.allocate(GpuRequest.builder().requiredDevices(i).owner("u" + i % 7).build());
                }
            }
            ConsoleServer.Builder b = ConsoleServer.builder().scheduler(scheduler).stateDir(state).clock(clock)
                    .accounting(
                            accounting ? AccountingSettings.defaults().withCheckpoint(checkpoint)
                                    : new AccountingSettings(false, Duration.ofSeconds(60), Duration.ofDays(2),
                                            Duration.ofDays(400), AccountingSettings.defaults().idle()));
            Method ticking = ConsoleServer.Builder.class.getDeclaredMethod("ticking", boolean.class);
            ticking.setAccessible(true);
            ticking.invoke(b, false);
            server = b.build();
            Method w = ConsoleServer.class.getDeclaredMethod("watcher");
            w.setAccessible(true);
            watcher = w.invoke(server);
            tick = watcher.getClass().getDeclaredMethod("tick");
            tick.setAccessible(true);
        }

        void tick() throws Exception {
            clock.now = clock.now.plusSeconds(1);
            tick.invoke(watcher);
        }

        @Override
        public void close() {
            server.close();
            scheduler.close();
            inv.close();
        }
    }

    /**
     * The console's own tick (sample, catch up, metrics into the scheduler, history, the tick and state events)
     * with accounting off, against the same tick with the console as the node's accounting sampler, on two identical
     * nodes in one process, ticked in alternating blocks; CPU time of this thread.
     */
    static void sampling(Path dir, boolean nvml, int rounds, int sweeps, Duration checkpoint)
            throws Exception {
        ThreadMXBean cpu = ManagementFactory.getThreadMXBean();
        System.out.println((nvml ? "NVML backend (the fake libnvidia-ml.so.1)" : "simulated backend")
                + ", checkpoint " + checkpoint.toSeconds()
                + " s, a console tick every second");
        System.out.println("gpus  round  console tick µs/GPU  with accounting µs/GPU  ratio");
        for (int n : nvml ? new int[]{8} : new int[]{8, 64}) {
            double[] ratios = new double[rounds];
            double[] base = new double[rounds];
            double[] with = new double[rounds];
            for (int r = 0; r < rounds; r++) {
                try (Console off =
                        new Console(n, Files.createTempDirectory(dir, "off"), false, checkpoint, nvml);
                     Console on =
                             new Console(n, Files.createTempDirectory(dir, "on"), true, checkpoint, nvml)) {
                    long baseNs = 0;
                    long withNs = 0;
                    int warm = sweeps / 4;
                    for (int i = 0; i < warm + sweeps; i++) {
                        boolean acct = (i / 50) % 2 == 1; // alternate blocks so drift hits both alike
                        Console c = acct ? on : off;
                        long t0 = cpu.getCurrentThreadCpuTime();
                        c.tick();
                        long t = cpu.getCurrentThreadCpuTime() - t0;
                        if (i >= warm) {
                            if (acct) {
                                withNs += t;
                            } else {
                                baseNs += t;
                            }
                        }
                    }
                    int half = sweeps / 2;
                    base[r] = baseNs / 1000.0 / half / n;
                    with[r] = withNs / 1000.0 / half / n;
                    ratios[r] = with[r] / base[r];
                    System.out.printf(Locale.ROOT, "%4d  %5d  %19.2f  %22.2f  %5.2f%n", n, r, base[r], with[r],
                            ratios[r]);
                }
            }
            System.out.printf(Locale.ROOT, "%d GPUs: median console tick %.2f µs, with accounting %.2f µs per GPU and"
                    + " sweep (a sweep a second: µs of CPU per GPU per second); ratio median %.2f (range %.2f-%.2f)%n",
                    n, median(base), median(with), median(ratios), Arrays.stream(ratios).min().orElse(0),
                    Arrays.stream(ratios).max().orElse(0));
        }
    }

    static void report(Path dir, List<Integer> sizes) throws Exception {
        System.out.println("allocations  records  write+compact s  by owner ms (CPU ms)  by day ms  by allocation ms"
                + " (CPU ms)  heap MiB (growth during the by-owner report)");
        for (int total : sizes) {
            Path state = Files.createTempDirectory(dir, "year-" + total);
            AccountingStore store = AccountingStore.at(state);
            LocalDate first = LocalDate.parse("2025-06-01");
            Random rnd = new Random(total);
            int perDay = Math.max(1, total / 365);
            long records = 0;
            long w0 = System.nanoTime();
            try (AccountingStore.Writer w = store.openWriter().orElseThrow()) {
                int id = 0;
                for (int d = 0; d < 365; d++) {
                    LocalDate day = first.plusDays(d);
                    Instant start = day.atStartOfDay().toInstant(ZoneOffset.UTC);
                    List<AccountingRecord> recs = new ArrayList<>(perDay);
                    for (int k = 0; k < perDay; k++) {
                        long from = rnd.nextInt(86_000_000);
                        long len = 60_000 + rnd.nextInt(Math.max(1, (int) Math.min(86_400_000 - from - 1, 7_200_000)));
                        int gpus = 1 + rnd.nextInt(2);
                        List<DeviceUsage> ds = new ArrayList<>();
                        for (int g = 0; g < gpus; g++) {
                            ds.add(new DeviceUsage(rnd.nextInt(8), "GPU-" + g, Figures.of(len, rnd.nextInt(101)),
                                    OptionalLong.of(rnd.nextInt(1 << 30)), List.of()));
                        }
                        int user = rnd.nextInt(60); // 60 users, each with its uid
                        recs.add(new Interval("n1-" + (id++), Optional.of("user" + user),
                                OptionalLong.of(1000 + user), Optional.of("job-" + id),
                                start.plusMillis(from), start.plusMillis(from + len), true, Optional.of("RELEASED"),
                                false, Optional.empty(), ds));
                    }
                    w.append(recs);
                    w.compact(day);
                    records += recs.size();
                }
            }
            double writeS = (System.nanoTime() - w0) / 1e9;
            Instant since = first.atStartOfDay().toInstant(ZoneOffset.UTC);
            Instant until = first.plusDays(365).atStartOfDay().toInstant(ZoneOffset.UTC);
            ThreadMXBean cpu = ManagementFactory.getThreadMXBean();
            double[] owner = new double[5];
            double[] ownerCpu = new double[5];
            double[] day = new double[5];
            double[] alloc = new double[3];
            double[] allocCpu = new double[3];
            long heap = 0;
            for (int i = 0; i < owner.length; i++) {
                System.gc();
                long before = used();
                long c0 = cpu.getCurrentThreadCpuTime();
                long t0 = System.nanoTime();
                UsageReport r = UsageReport.of(store, since, until, UsageReport.GroupBy.OWNER);
                owner[i] = (System.nanoTime() - t0) / 1e6;
                ownerCpu[i] = (cpu.getCurrentThreadCpuTime() - c0) / 1e6;
                heap = Math.max(heap, used() - before);
                if (r.allocations() != records) {
                    throw new IllegalStateException(r.allocations() + " allocations reported, " + records + " written");
                }
                t0 = System.nanoTime();
                UsageReport.of(store, since, until, UsageReport.GroupBy.DAY);
                day[i] = (System.nanoTime() - t0) / 1e6;
            }
            for (int i = 0; i < alloc.length; i++) {
                long c0 = cpu.getCurrentThreadCpuTime();
                long t0 = System.nanoTime();
                UsageReport.of(store, since, until, UsageReport.GroupBy.ALLOCATION);
                alloc[i] = (System.nanoTime() - t0) / 1e6;
                allocCpu[i] = (cpu.getCurrentThreadCpuTime() - c0) / 1e6;
            }
            System.out.printf(Locale.ROOT, "%11d  %7d  %14.1f  %8.1f (%7.1f)  %9.1f  %8.1f (%7.1f)  %8.1f%n", total,
                    records, writeS, median(owner), median(ownerCpu), median(day), median(alloc), median(allocCpu),
                    heap / 1048576.0);
            System.out.println("  (one line is " + RecordCodec.encode(new Interval("n1-1", Optional.of("user1"),
                    OptionalLong.of(1001), Optional.of("job-1"), since, since.plusSeconds(60), true,
                    Optional.of("RELEASED"), false, Optional.empty(), List.of(new DeviceUsage(0, "GPU-0",
                            Figures.of(60_000, 50), OptionalLong.of(1), List.of()))))
                    .length() + " bytes)");
        }
    }

    /** Usage figures of a busy interval, through the store's own decoder (the figures' fields are the store's). */
    static final class Figures {
        static UsageFigures of(long millis, int util) {
            String json = "{\"k\":\"d\",\"day\":\"2026-01-01\",\"i\":0,\"uuid\":\"u\",\"n\":0,\"held\":" + millis
                    + ",\"meas\":" + millis + ",\"um\":" + millis + ",\"us\":" + (double) util * millis + ",\"up\":"
                    + util + ",\"idle\":" + (util <= 1 ? millis : 0) + ",\"mp\":1073741824,\"e\":" + 250L * millis
                    + ",\"ee\":0,\"em\":" + millis + "}";
            CRC32C c = new CRC32C();
            byte[] b = json.getBytes(StandardCharsets.UTF_8);
            c.update(b, 0, b.length);
            return ((AccountingRecord.DaySummary) RecordCodec.decode(String.format("%08x", c.getValue()) + " "
                    + json)).figures();
        }
    }

    private static long used() {
        Runtime rt = Runtime.getRuntime();
        return rt.totalMemory() - rt.freeMemory();
    }

    private static double median(double[] v) {
        double[] c = v.clone();
        Arrays.sort(c);
        return c.length % 2 == 1 ? c[c.length / 2] : (c[c.length / 2 - 1] + c[c.length / 2]) / 2;
    }
}
