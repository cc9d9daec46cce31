package io.gpusched.nvml;

import io.gpusched.core.BackendUnavailableException;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuInventoryProvider;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.internal.NvidiaDriver;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.OptionalInt;

/**
 * Pure-Java fallback: NVIDIA GPUs from {@code /proc/driver/nvidia} (model, UUID, bus location, minor, driver
 * version). It has no memory size (read off the model name where it says, e.g. "…-32GB"), no topology and no live
 * metrics. Roots from {@code -Dgpusched.proc.root} and {@code -Dgpusched.sysfs.root}.
 */
public final class ProcfsInventoryProvider implements GpuInventoryProvider {

    /** Priority: below NVML, above nvidia-smi. */
    public static final int PRIORITY = 50;

    private final Path procRoot;
    private final Path sysfsRoot;

    /** With roots from system properties (default {@code /proc}, {@code /sys}). */
    public ProcfsInventoryProvider() {
        this(Path.of(System.getProperty("gpusched.proc.root", "/proc")),
                Path.of(System.getProperty("gpusched.sysfs.root", "/sys")));
    }

    /** @param procRoot root of procfs @param sysfsRoot root of sysfs */
    public ProcfsInventoryProvider(Path procRoot, Path sysfsRoot) {
        this.procRoot = procRoot;
        this.sysfsRoot = sysfsRoot;
    }

    @Override
    public String name() {
        return "procfs";
    }

    @Override
    public int priority() {
        return PRIORITY;
    }

    @Override
    public Optional<String> unavailabilityCause() {
        if (!Files.isRegularFile(procRoot.resolve("driver/nvidia/version"))) {
            return Optional.of("NVIDIA kernel module not loaded (" + procRoot.resolve("driver/nvidia/version")
                    + " is absent)");
        }
        try {
            if (ProcDriverNvidia.gpus(procRoot).isEmpty()) {
                return Optional.of("no GPU listed under " + procRoot.resolve("driver/nvidia/gpus"));
            }
        } catch (IOException e) {
            return Optional.of("cannot read " + procRoot.resolve("driver/nvidia/gpus") + ": " + e.getMessage());
        }
        return Optional.empty();
    }

    @Override
    public GpuInventory open(GpuConfig config) {
        List<ProcDriverNvidia.GpuInfo> gpus;
        try {
            gpus = ProcDriverNvidia.gpus(procRoot);
        } catch (IOException e) {
            throw new BackendUnavailableException("cannot read " + procRoot + "/driver/nvidia/gpus: " + e.getMessage());
        }
        Optional<String> driver = NvidiaDriver.loadedVersion(procRoot);
        List<GpuDevice> devices = new ArrayList<>();
        for (int i = 0; i < gpus.size(); i++) {
            ProcDriverNvidia.GpuInfo g = gpus.get(i);
            OptionalInt gib = ProcDriverNvidia.memoryFromModel(g.model());
            GpuDevice.Builder b = GpuDevice.builder().index(i).uuid(g.uuid()).vendor(GpuVendor.NVIDIA)
                    .name(g.model()).memory(gib.isPresent() ? MemorySize.ofGibibytes(gib.getAsInt()) : MemorySize.ZERO)
                    .pciBusId(PciBusIds.normalize(g.busLocation()).orElse(g.busLocation()))
                    .property("memory_source", gib.isPresent() ? "model name" : "unknown");
            g.minor().ifPresent(b::minor);
            driver.ifPresent(b::driverVersion);
            PciBusIds.numaNode(sysfsRoot, g.busLocation()).ifPresent(b::numaNode);
            devices.add(b.build());
        }
        if (devices.isEmpty()) {
            throw new BackendUnavailableException("no GPU listed under " + procRoot + "/driver/nvidia/gpus");
        }
        return new StaticNvidiaInventory("procfs", devices, StaticNvidiaInventory.noMetrics(devices,
                Clock.systemUTC()));
    }
}
