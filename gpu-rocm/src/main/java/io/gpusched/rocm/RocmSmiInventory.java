package io.gpusched.rocm;

import io.gpusched.core.BackendUnavailableException;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.GpuProcessUsage;
import io.gpusched.core.GpuSample;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.ProcessUsageSample;
import io.gpusched.rocm.internal.RocmSmiBinding;
import io.gpusched.rocm.internal.RocmSmiBinding.Core;
import io.gpusched.rocm.internal.RocmSmiReader;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.OptionalLong;

/**
 * AMD GPUs through ROCm SMI: {@code rsmi_init} once, {@code rsmi_shut_down} on close. Static facts that ROCm SMI 5
 * does not give (render minor, gfx target, partitions, XGMI links) come from the KFD sysfs tree when it is present,
 * joined by PCI address; live values come from ROCm SMI with one native block per device.
 */
public final class RocmSmiInventory implements GpuInventory {
    private final List<GpuDevice> devices;
    private final int[] smiIndex;
    private final GpuTopology topology;
    private final RocmSmiReader.Sampler sampler;
    private final Clock clock;
    private final Path sysfsRoot;
    private boolean closed;

    private RocmSmiInventory(List<GpuDevice> devices, int[] smiIndex, GpuTopology topology, Clock clock,
            Path sysfsRoot) {
        this.sysfsRoot = sysfsRoot;
        this.devices = List.copyOf(devices);
        this.smiIndex = smiIndex;
        this.topology = topology;
        this.clock = clock;
        this.sampler = new RocmSmiReader.Sampler(smiIndex);
    }

    /**
     * Opens ROCm SMI after checking the KFD tree it will read.
     *
     * @throws BackendUnavailableException with the cause (malformed KFD tree, library not found, rsmi_init status)
     */
    public static RocmSmiInventory open(Optional<Path> library, Path sysfsRoot, Path devRoot, Clock clock) {
        return open(library, sysfsRoot, devRoot, clock, false);
    }

    /**
     * @param initWithoutDriver call {@code rsmi_init} even when nothing of amdgpu is present (librocm_smi then prints
     *                          its own complaint to stderr and answers 8); by default such hosts are answered without
     *                          loading it
     */
    public static RocmSmiInventory open(Optional<Path> library, Path sysfsRoot, Path devRoot, Clock clock,
            boolean initWithoutDriver) {
        return open(library, sysfsRoot, devRoot, clock, initWithoutDriver, Guard.DEFAULT);
    }

    /**
     * What stands between a sysfs tree and an in-process {@code rsmi_init}.
     *
     * @param kfdCheck   refuse the KFD shapes librocm_smi 5.x is known to kill its process on ({@link KfdSanity})
     * @param childProbe run the library in a child JVM first ({@link RocmSmiProbe}) where a KFD topology or an AMD
     *                   DRM device exists; on by default, off with {@code -Dgpusched.rocm-smi.probe=false}
     */
    record Guard(boolean kfdCheck, boolean childProbe) {
        static final Guard DEFAULT = new Guard(true,
                Boolean.parseBoolean(System.getProperty("gpusched.rocm-smi.probe", "true")));
    }

    static RocmSmiInventory open(Optional<Path> library, Path sysfsRoot, Path devRoot, Clock clock,
            boolean initWithoutDriver, Guard guard) {
        if (!initWithoutDriver && KfdSanity.noDriverAtAll(sysfsRoot, devRoot)) {
            throw new BackendUnavailableException(KfdSanity.driverState(sysfsRoot, devRoot)
                    + ", no /dev/kfd and no /sys/class/drm; rsmi_init not called");
        }
        if (guard.kfdCheck()) {
            Optional<String> unsafe = KfdSanity.problem(sysfsRoot);
            if (unsafe.isPresent()) {
                throw new BackendUnavailableException(unsafe.get());
            }
        }
        if (guard.childProbe() && RocmSmiProbe.needed(sysfsRoot)) {
            Optional<String> crashed = RocmSmiProbe.check(library);
            if (crashed.isPresent()) {
                throw new BackendUnavailableException(crashed.get());
            }
        }
        try {
            RocmSmiBinding.acquire(library);
        } catch (RocmSmiBinding.LoadException e) {
            throw new BackendUnavailableException(e.getMessage());
        }
        int rc = Core.rsmi_init(0);
        if (rc != 0) {
            RocmSmiBinding.release();
            throw new BackendUnavailableException("rsmi_init returned " + RocmSmiBinding.describe(rc) + "; "
                    + KfdSanity.driverState(sysfsRoot, devRoot));
        }
        try {
            return read(sysfsRoot, clock);
        } catch (RuntimeException e) {
            Core.rsmi_shut_down();
            RocmSmiBinding.release();
            throw e instanceof BackendUnavailableException b ? b
                    : new BackendUnavailableException("ROCm SMI initialized but reading devices failed: "
                            + e.getMessage(), List.of(), e);
        }
    }

    private static RocmSmiInventory read(Path sysfsRoot, Clock clock) {
        RocmSmiReader r = new RocmSmiReader();
        int n = r.deviceCount();
        if (n < 0) {
            throw new BackendUnavailableException("rsmi_num_monitor_devices returned " + RocmSmiBinding.describe(-n));
        }
        Optional<KfdTopology> kfd = KfdTopology.read(sysfsRoot);
        if (n == 0) {
            throw new BackendUnavailableException("ROCm SMI reports no GPU (rsmi_num_monitor_devices = 0)"
                    + kfd.map(k -> k.gpuNodes().isEmpty() ? "" : " although the KFD topology lists "
                            + k.gpuNodes().size() + " GPU node(s); the amd-sysfs provider may still serve them")
                            .orElse(""));
        }
        Map<String, Integer> smiByKey = new HashMap<>();
        List<GpuDevice> fromSmi = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            OptionalLong bdf = r.bdfId(i);
            String bus = r.pciAddress(i);
            if (bdf.isEmpty() || bus == null) {
                throw new BackendUnavailableException("rsmi_dev_pci_id_get failed for device " + i);
            }
            smiByKey.putIfAbsent(PciKeys.ofSmiBdf(bdf.getAsLong()), i);
            String name = Optional.ofNullable(r.name(i)).filter(x -> !x.isBlank()).orElse("AMD GPU");
            long unique = r.uniqueId(i).orElse(0);
            GpuDevice.Builder b = GpuDevice.builder().index(i).vendor(GpuVendor.AMD).name(name)
                    .uuid(unique != 0 ? String.format(Locale.ROOT, "GPU-%016x", unique) : "AMD-" + bus)
                    .pciBusId(bus).property("rsmi.index", String.valueOf(i));
            OptionalLong vram = r.vramTotal(i);
            if (vram.isPresent() && vram.getAsLong() > 0) {
                b.memory(MemorySize.ofBytes(vram.getAsLong()));
            } else {
                b.memoryUnknown();
            }
            fromSmi.add(b.build());
        }
        if (kfd.isPresent() && !kfd.get().gpuNodes().isEmpty()) {
            KfdSysfsInventory sys = KfdSysfsInventory.from(kfd.get(), sysfsRoot, clock);
            int[] idx = new int[sys.devices().size()];
            List<GpuDevice> joined = new ArrayList<>();
            for (int i = 0; i < idx.length; i++) {
                GpuDevice d = sys.devices().get(i);
                Integer s = smiByKey.get(PciKeys.ofKfd(Long.parseLong(d.properties().getOrDefault("kfd.domain", "0")),
                        Long.parseLong(d.properties().get("location_id"))));
                idx[i] = s == null ? -1 : s;
                joined.add(s == null ? d : d.toBuilder().property("rsmi.index", String.valueOf(s)).build());
            }
            return new RocmSmiInventory(joined, idx, sys.topology(), clock, sysfsRoot);
        }
        int[] idx = new int[n];
        for (int i = 0; i < n; i++) {
            idx[i] = i;
        }
        return new RocmSmiInventory(fromSmi, idx, GpuTopology.unconnected(fromSmi), clock, sysfsRoot);
    }

    @Override
    public String backend() {
        return "rocm-smi";
    }

    @Override
    public List<GpuDevice> devices() {
        return devices;
    }

    @Override
    public GpuTopology topology() {
        return topology;
    }

    /** Busy %, VRAM used, edge temperature (junction where edge is absent), average power (µW). */
    @Override
    public synchronized GpuSample sample() {
        if (closed) {
            throw new IllegalStateException("ROCm SMI inventory is closed");
        }
        Instant now = clock.instant();
        sampler.sweep();
        long[] v = sampler.values();
        List<GpuMetrics> out = new ArrayList<>(devices.size());
        for (int i = 0; i < devices.size(); i++) {
            int base = i * RocmSmiReader.Sampler.STRIDE;
            out.add(new GpuMetrics(devices.get(i).index(), value(v[base], 1),
                    v[base + 1] == RocmSmiReader.ABSENT ? Optional.empty() : Optional.of(MemorySize.ofBytes(v[base
                            + 1])),
                    value(v[base + 2], 1000.0), value(v[base + 3], 1_000_000.0), now,
                    v[base + 4] == RocmSmiReader.ABSENT ? OptionalLong.empty() : OptionalLong.of(v[base + 4])));
        }
        return new GpuSample(now, out);
    }

    /**
     * The processes using a device and their VRAM: from the KFD's {@code proc/<pid>/vram_<gpu_id>} files where the
     * sysfs shows them (exact per GPU), else from ROCm SMI's process list ({@code rsmi_compute_process_info_get} and
     * {@code rsmi_compute_process_gpus_get}), whose VRAM is a process's sum over all its GPUs: charged to this GPU
     * only for a process that uses no other, unknown otherwise. Per-process utilization is not measured on AMD GPUs
     * ({@link KfdProcesses#UTILIZATION_NOT_MEASURED}).
     *
     * @return the sample; empty when neither source can list processes here
     */
    @Override
    public synchronized Optional<ProcessUsageSample> processUsage(GpuDevice device) {
        if (closed) {
            throw new IllegalStateException("ROCm SMI inventory is closed");
        }
        int i = -1;
        for (int k = 0; k < devices.size() && i < 0; k++) {
            i = devices.get(k).uuid().equals(device.uuid()) ? k : -1;
        }
        if (i < 0) {
            throw new IllegalArgumentException("device " + device.uuid() + " is not in this ROCm SMI inventory");
        }
        Instant now = clock.instant();
        Optional<String> util = Optional.of(KfdProcesses.UTILIZATION_NOT_MEASURED);
        OptionalLong gpuId = KfdProcesses.gpuId(sysfsRoot, device);
        if (gpuId.isPresent()) {
            Optional<Map<Integer, Long>> kfd = KfdProcesses.vram(sysfsRoot, gpuId.getAsLong());
            if (kfd.isPresent()) {
                List<GpuProcessUsage> ps = new ArrayList<>();
                kfd.get().forEach((pid, bytes) -> ps.add(new GpuProcessUsage(pid, OptionalDouble.empty(),
                        Optional.of(MemorySize.ofBytes(bytes)))));
                return Optional.of(new ProcessUsageSample(now, ps, util, Optional.empty()));
            }
        }
        if (!RocmSmiBinding.hasProcesses()) {
            return Optional.empty();
        }
        if (smiIndex[i] < 0) {
            return Optional.of(new ProcessUsageSample(now, List.of(), util, Optional.of("ROCm SMI does not know this"
                    + " device and the KFD's sysfs lists no processes")));
        }
        RocmSmiReader.SmiProcesses sp = RocmSmiReader.processes();
        if (sp.status() != 0) {
            String why = "rsmi_compute_process_info_get returned " + RocmSmiBinding.describe(sp.status());
            return Optional.of(new ProcessUsageSample(now, List.of(), util, Optional.of(why)));
        }
        List<GpuProcessUsage> ps = new ArrayList<>();
        boolean anyMemory = false;
        for (long[] row : sp.processes()) {
            boolean here = false;
            for (int k = 2; k < row.length; k++) {
                here |= row[k] == smiIndex[i];
            }
            if (!here || row[0] < 1 || row[0] > Integer.MAX_VALUE) {
                continue;
            }
            Optional<MemorySize> mem = row.length == 3 && row[1] >= 0 ? Optional.of(MemorySize.ofBytes(row[1]))
                    : Optional.empty();
            anyMemory |= mem.isPresent();
            ps.add(new GpuProcessUsage((int) row[0], OptionalDouble.empty(), mem));
        }
        Optional<String> memWhy = ps.isEmpty() || anyMemory ? Optional.empty()
                : Optional.of("ROCm SMI gives each process's VRAM summed over all its GPUs, and these processes use"
                        + " several");
        return Optional.of(new ProcessUsageSample(now, ps, util, memWhy));
    }

    private static OptionalDouble value(long raw, double divisor) {
        return raw == RocmSmiReader.ABSENT ? OptionalDouble.empty() : OptionalDouble.of(raw / divisor);
    }

    @Override
    public synchronized void close() {
        if (!closed) {
            closed = true;
            Core.rsmi_shut_down();
            RocmSmiBinding.release();
        }
    }

    @Override
    public String toString() {
        return "rocm-smi (" + devices.size() + " devices)";
    }
}
