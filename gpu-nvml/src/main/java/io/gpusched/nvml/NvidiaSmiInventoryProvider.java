package io.gpusched.nvml;

import io.gpusched.core.BackendUnavailableException;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuInventoryProvider;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.GpuProcessUsage;
import io.gpusched.core.GpuSample;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.ProcessUsageSample;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.OptionalInt;
import java.util.concurrent.TimeUnit;

/**
 * Last-resort fallback: runs {@code nvidia-smi -q -x} (no shell, with a timeout) and parses it. Each
 * {@link GpuInventory#sample()} runs it again, which costs 7 to 400 ms: for hosts where NVML cannot be loaded into
 * the JVM. No topology, no energy counter. Per-process usage: the memory of each process in {@code <processes>}, from
 * the latest sample's run (no run of its own when that is fresh); utilization per process is not measured. MIG
 * devices without a UUID in the XML get the legacy {@code MIG-GPU-…/GI/CI} identifier.
 * Binary from {@code -Dgpusched.nvidia-smi.path}, else {@code nvidia-smi} on the PATH.
 */
public final class NvidiaSmiInventoryProvider implements GpuInventoryProvider {

    /** Priority: lowest of the NVIDIA providers. */
    public static final int PRIORITY = 30;

    private final Optional<Path> binary;
    private final Duration timeout;

    /** With the binary from {@code -Dgpusched.nvidia-smi.path} or the PATH, and a 10 s timeout. */
    public NvidiaSmiInventoryProvider() {
        this(Optional.ofNullable(System.getProperty("gpusched.nvidia-smi.path")).map(Path::of)
                .or(NvidiaSmiInventoryProvider::onPath), Duration.ofSeconds(10));
    }

    /** @param binary the nvidia-smi executable @param timeout per run */
    public NvidiaSmiInventoryProvider(Optional<Path> binary, Duration timeout) {
        this.binary = binary;
        this.timeout = timeout;
    }

    private static Optional<Path> onPath() {
        for (String dir : System.getenv().getOrDefault("PATH", "").split(":")) {
            if (!dir.isEmpty() && Files.isExecutable(Path.of(dir, "nvidia-smi"))) {
                return Optional.of(Path.of(dir, "nvidia-smi"));
            }
        }
        return Optional.empty();
    }

    @Override
    public String name() {
        return "nvidia-smi";
    }

    @Override
    public int priority() {
        return PRIORITY;
    }

    @Override
    public Optional<String> unavailabilityCause() {
        try {
            NvidiaSmiXml.Report r = NvidiaSmiXml.parse(run());
            return r.gpus().isEmpty() ? Optional.of("nvidia-smi lists no GPU") : Optional.empty();
        } catch (BackendUnavailableException | IllegalArgumentException e) {
            return Optional.of(e.getMessage());
        }
    }

    /** @return the XML of one run @throws BackendUnavailableException with the exit code and first output line */
    String run() {
        Path bin = binary.orElseThrow(() -> new BackendUnavailableException("nvidia-smi not found on the PATH"));
        if (!Files.isExecutable(bin)) {
            throw new BackendUnavailableException("nvidia-smi not found: " + bin + " is not executable");
        }
        Process p;
        try {
            p = new ProcessBuilder(bin.toString(), "-q", "-x").redirectErrorStream(true).start();
        } catch (IOException e) {
            throw new BackendUnavailableException("cannot run " + bin + ": " + e.getMessage());
        }
        try {
            p.getOutputStream().close();
            var out = p.getInputStream();
            byte[][] holder = new byte[1][];
            Thread reader = new Thread(() -> {
                try {
                    holder[0] = out.readAllBytes();
                } catch (IOException e) {
                    holder[0] = new byte[0];
                }
            }, "gpusched-nvidia-smi-reader");
            reader.setDaemon(true);
            reader.start();
            if (!p.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
                p.destroyForcibly();
                throw new BackendUnavailableException("nvidia-smi did not answer within " + timeout.toMillis() + " ms");
            }
            reader.join(timeout.toMillis());
            String text = holder[0] == null ? "" : new String(holder[0], StandardCharsets.UTF_8);
            if (p.exitValue() != 0) {
                String first = text.strip().lines().findFirst().orElse("");
                String what = p.exitValue() == 9 ? "driver not loaded" : "failed";
                throw new BackendUnavailableException("nvidia-smi " + what + " (exit " + p.exitValue() + ": "
                        + first + ")");
            }
            return text;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            p.destroyForcibly();
            throw new BackendUnavailableException("interrupted while running nvidia-smi");
        } catch (IOException e) {
            throw new BackendUnavailableException("cannot talk to nvidia-smi: " + e.getMessage());
        }
    }

    @Override
    public GpuInventory open(GpuConfig config) {
        NvidiaSmiXml.Report report = NvidiaSmiXml.parse(run());
        List<GpuDevice> devices = devices(report);
        if (devices.isEmpty()) {
            throw new BackendUnavailableException("nvidia-smi lists no GPU");
        }
        Latest latest = new Latest();
        return new StaticNvidiaInventory("nvidia-smi", devices, () -> sample(devices, latest),
                d -> processUsage(d, devices, latest));
    }

    /** The report of the latest run, which {@link #processUsage} reuses rather than run nvidia-smi again. */
    private static final class Latest {
        NvidiaSmiXml.Report report;
        Instant at;
    }

    /** Why per-process utilization is not measured through nvidia-smi. */
    static final String NO_PROCESS_UTILIZATION = "nvidia-smi -q -x gives no per-process utilization";

    /**
     * The processes holding memory on a device, from the {@code <processes>} of the latest report (the latest
     * {@link GpuInventory#sample()}'s run when it is at most 5 s old, else a run of its own): memory per process in
     * MiB; utilization not measured ({@value #NO_PROCESS_UTILIZATION}). A MIG device gets the processes of its GPU
     * and compute instance.
     */
    private Optional<ProcessUsageSample> processUsage(GpuDevice d, List<GpuDevice> devices, Latest latest) {
        Instant now = Instant.now();
        NvidiaSmiXml.Report r;
        synchronized (latest) {
            r = latest.report;
            if (r == null || latest.at.isBefore(now.minusSeconds(5))) {
                try {
                    r = NvidiaSmiXml.parse(run());
                } catch (RuntimeException e) {
                    String why = "nvidia-smi: " + e.getMessage();
                    return Optional.of(new ProcessUsageSample(now, List.of(), Optional.of(why), Optional.of(why)));
                }
                latest.report = r;
                latest.at = now;
            }
        }
        String gpuUuid = d.parentUuid().orElse(d.uuid());
        Optional<NvidiaSmiXml.Gpu> g = r.gpus().stream().filter(x -> x.uuid().equals(gpuUuid)).findFirst();
        if (g.isEmpty()) {
            String why = "nvidia-smi no longer lists GPU " + gpuUuid;
            return Optional.of(new ProcessUsageSample(now, List.of(), Optional.of(why), Optional.of(why)));
        }
        OptionalInt gi = integer(d.properties().get("mig.gpu_instance_id"));
        OptionalInt ci = integer(d.properties().get("mig.compute_instance_id"));
        List<GpuProcessUsage> out = new ArrayList<>();
        for (NvidiaSmiXml.Process p : g.get().processes()) {
            boolean here = d.isPartition() ? p.gpuInstanceId().equals(gi) && p.computeInstanceId().equals(ci)
                    : p.gpuInstanceId().isEmpty();
            if (here) {
                out.add(new GpuProcessUsage(p.pid(), OptionalDouble.empty(), p.usedMemoryMib().isPresent()
                        ? Optional.of(MemorySize.ofMebibytes(p.usedMemoryMib().getAsLong())) : Optional.empty()));
            }
        }
        return Optional.of(new ProcessUsageSample(now, out, Optional.of(NO_PROCESS_UTILIZATION), Optional.empty()));
    }

    private static OptionalInt integer(String s) {
        return s != null && s.matches("[0-9]{1,9}") ? OptionalInt.of(Integer.parseInt(s)) : OptionalInt.empty();
    }

    /** GPUs in document order take indices 0..n-1; MIG devices follow, and their parent is withheld. */
    static List<GpuDevice> devices(NvidiaSmiXml.Report report) {
        List<GpuDevice> out = new ArrayList<>();
        List<NvidiaSmiXml.Gpu> gpus = report.gpus();
        int next = gpus.size();
        for (int i = 0; i < gpus.size(); i++) {
            NvidiaSmiXml.Gpu g = gpus.get(i);
            GpuDevice.Builder b = GpuDevice.builder().index(i).uuid(g.uuid()).vendor(GpuVendor.NVIDIA).name(g.name())
                    .memory(MemorySize.ofMebibytes(g.memoryTotalMib().orElse(0))).pciBusId(g.pciBusId())
                    .property("mig_mode", g.migEnabled() ? "Enabled" : "Disabled");
            g.minor().ifPresent(b::minor);
            report.driverVersion().ifPresent(b::driverVersion);
            report.cudaVersion().ifPresent(v -> b.property("cuda_driver_version", v));
            if (!g.migEnabled() || g.migs().isEmpty()) {
                out.add(b.build());
                continue;
            }
            for (NvidiaSmiXml.Mig m : g.migs()) {
                GpuDevice.Builder c = GpuDevice.builder().index(next++)
                        .uuid(m.uuid().orElse("MIG-" + g.uuid() + "/" + m.gpuInstanceId() + "/"
                                + m.computeInstanceId()))
                        .vendor(GpuVendor.NVIDIA).name(g.name() + " MIG")
                        .memory(MemorySize.ofMebibytes(m.memoryTotalMib().orElse(0))).pciBusId(g.pciBusId())
                        .parentUuid(g.uuid()).property("nvidia_smi.index", String.valueOf(i))
                        .property("mig.gpu_instance_id", String.valueOf(m.gpuInstanceId()))
                        .property("mig.compute_instance_id", String.valueOf(m.computeInstanceId()));
                g.minor().ifPresent(c::minor);
                report.driverVersion().ifPresent(c::driverVersion);
                out.add(c.build());
            }
        }
        return out;
    }

    private GpuSample sample(List<GpuDevice> devices, Latest latest) {
        Instant now = Instant.now();
        Map<String, NvidiaSmiXml.Gpu> byUuid = new HashMap<>();
        try {
            NvidiaSmiXml.Report r = NvidiaSmiXml.parse(run());
            synchronized (latest) {
                latest.report = r;
                latest.at = now;
            }
            for (NvidiaSmiXml.Gpu g : r.gpus()) {
                byUuid.put(g.uuid(), g);
            }
        } catch (RuntimeException e) {
            byUuid.clear();
        }
        List<GpuMetrics> m = new ArrayList<>();
        for (GpuDevice d : devices) {
            NvidiaSmiXml.Gpu g = byUuid.get(d.parentUuid().orElse(d.uuid()));
            if (g == null || d.isPartition()) {
                m.add(GpuMetrics.unavailable(d.index(), now));
                continue;
            }
            m.add(new GpuMetrics(d.index(), g.utilization(),
                    g.memoryUsedMib().isPresent() ? Optional.of(MemorySize.ofMebibytes(g.memoryUsedMib().getAsLong()))
                            : Optional.empty(),
                    g.temperature(), g.powerWatts().isPresent() ? g.powerWatts() : OptionalDouble.empty(), now));
        }
        return new GpuSample(now, m);
    }
}
