package io.gpusched.nvml;

import io.gpusched.core.BackendUnavailableException;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuInventoryProvider;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.GpuSample;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
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
import java.util.concurrent.TimeUnit;

/**
 * Last-resort fallback: runs {@code nvidia-smi -q -x} (no shell, with a timeout) and parses it. Each
 * {@link GpuInventory#sample()} runs it again, which costs 7 to 400 ms: for hosts where NVML cannot be loaded into
 * the JVM. No topology. MIG devices without a UUID in the XML get the legacy {@code MIG-GPU-…/GI/CI} identifier.
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
        return new StaticNvidiaInventory("nvidia-smi", devices, () -> sample(devices));
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

    private GpuSample sample(List<GpuDevice> devices) {
        Instant now = Instant.now();
        Map<String, NvidiaSmiXml.Gpu> byUuid = new HashMap<>();
        try {
            for (NvidiaSmiXml.Gpu g : NvidiaSmiXml.parse(run()).gpus()) {
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
