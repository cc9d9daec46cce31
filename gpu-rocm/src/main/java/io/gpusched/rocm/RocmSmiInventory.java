package io.gpusched.rocm;

import com.sun.jna.Memory;
import com.sun.jna.Pointer;
import io.gpusched.core.BackendUnavailableException;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.GpuSample;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.rocm.internal.RocmSmiBinding;
import io.gpusched.rocm.internal.RocmSmiBinding.Core;
import java.nio.charset.StandardCharsets;
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

/**
 * AMD GPUs through ROCm SMI: {@code rsmi_init} once, {@code rsmi_shut_down} on close. Static facts that ROCm SMI 5
 * does not give (render minor, gfx target, partitions, XGMI links) come from the KFD sysfs tree when it is present,
 * joined by PCI address; live values come from ROCm SMI with one native block per device.
 */
public final class RocmSmiInventory implements GpuInventory {
    static final int MEM_VRAM = 0;
    static final int TEMP_EDGE = 0;
    static final int TEMP_JUNCTION = 1;
    static final int TEMP_CURRENT = 0;

    private final List<GpuDevice> devices;
    private final int[] smiIndex;
    private final GpuTopology topology;
    private final Memory[] blocks;
    private final Clock clock;
    private boolean closed;

    private RocmSmiInventory(List<GpuDevice> devices, int[] smiIndex, GpuTopology topology, Clock clock) {
        this.devices = List.copyOf(devices);
        this.smiIndex = smiIndex;
        this.topology = topology;
        this.clock = clock;
        this.blocks = new Memory[devices.size()];
        for (int i = 0; i < blocks.length; i++) {
            blocks[i] = new Memory(16);
        }
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
        if (!initWithoutDriver && KfdSanity.noDriverAtAll(sysfsRoot, devRoot)) {
            throw new BackendUnavailableException(KfdSanity.driverState(sysfsRoot, devRoot)
                    + ", no /dev/kfd and no /sys/class/drm; rsmi_init not called");
        }
        Optional<String> unsafe = KfdSanity.problem(sysfsRoot);
        if (unsafe.isPresent()) {
            throw new BackendUnavailableException(unsafe.get());
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
        Memory m = new Memory(256);
        check(Core.rsmi_num_monitor_devices(Pointer.nativeValue(m)), "rsmi_num_monitor_devices");
        int n = m.getInt(0);
        Map<String, Integer> smiByBdf = new HashMap<>();
        List<GpuDevice> fromSmi = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            check(Core.rsmi_dev_pci_id_get(i, Pointer.nativeValue(m)), "rsmi_dev_pci_id_get");
            long bdf = m.getLong(0);
            String bus = String.format(Locale.ROOT, "%04x:%02x:%02x.%x", (bdf >>> 32) & 0xFFFFFFFFL, (bdf >> 8) & 0xFF,
                    (bdf >> 3) & 0x1F, bdf & 0x7);
            smiByBdf.putIfAbsent(bus, i);
            String name = Core.rsmi_dev_name_get(i, Pointer.nativeValue(m), 256) == 0
                    ? m.getString(0, StandardCharsets.UTF_8.name()) : "AMD GPU";
            long unique = Core.rsmi_dev_unique_id_get(i, Pointer.nativeValue(m)) == 0 ? m.getLong(0) : 0;
            long vram = Core.rsmi_dev_memory_total_get(i, MEM_VRAM, Pointer.nativeValue(m)) == 0 ? m.getLong(0) : 0;
            fromSmi.add(GpuDevice.builder().index(i).vendor(GpuVendor.AMD).name(name.isBlank() ? "AMD GPU" : name)
                    .uuid(unique != 0 ? String.format(Locale.ROOT, "GPU-%016x", unique) : "AMD-" + bus)
                    .memory(MemorySize.ofBytes(vram)).pciBusId(bus).property("rsmi.index", String.valueOf(i)).build());
        }
        Optional<KfdTopology> kfd = KfdTopology.read(sysfsRoot);
        if (kfd.isPresent() && !kfd.get().gpuNodes().isEmpty()) {
            KfdSysfsInventory sys = KfdSysfsInventory.from(kfd.get(), sysfsRoot, clock);
            int[] idx = new int[sys.devices().size()];
            List<GpuDevice> joined = new ArrayList<>();
            for (int i = 0; i < idx.length; i++) {
                GpuDevice d = sys.devices().get(i);
                Integer s = smiByBdf.get(d.pciBusId());
                idx[i] = s == null ? -1 : s;
                joined.add(s == null ? d : d.toBuilder().property("rsmi.index", String.valueOf(s)).build());
            }
            return new RocmSmiInventory(joined, idx, sys.topology(), clock);
        }
        int[] idx = new int[n];
        for (int i = 0; i < n; i++) {
            idx[i] = i;
        }
        return new RocmSmiInventory(fromSmi, idx, GpuTopology.unconnected(fromSmi), clock);
    }

    private static void check(int rc, String call) {
        if (rc != 0) {
            throw new BackendUnavailableException(call + " returned " + RocmSmiBinding.describe(rc));
        }
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
        List<GpuMetrics> out = new ArrayList<>(devices.size());
        for (int i = 0; i < devices.size(); i++) {
            int dv = smiIndex[i];
            if (dv < 0) {
                out.add(GpuMetrics.unavailable(devices.get(i).index(), now));
                continue;
            }
            long a = Pointer.nativeValue(blocks[i]);
            Memory b = blocks[i];
            OptionalDouble busy = Core.rsmi_dev_busy_percent_get(dv, a) == 0
                    ? OptionalDouble.of(b.getInt(0) & 0xFFFFFFFFL) : OptionalDouble.empty();
            Optional<MemorySize> used = Core.rsmi_dev_memory_usage_get(dv, MEM_VRAM, a) == 0
                    ? Optional.of(MemorySize.ofBytes(b.getLong(0))) : Optional.empty();
            OptionalDouble temp = Core.rsmi_dev_temp_metric_get(dv, TEMP_EDGE, TEMP_CURRENT, a) == 0
                    || Core.rsmi_dev_temp_metric_get(dv, TEMP_JUNCTION, TEMP_CURRENT, a) == 0
                    ? OptionalDouble.of(b.getLong(0) / 1000.0) : OptionalDouble.empty();
            OptionalDouble power = OptionalDouble.empty();
            if (RocmSmiBinding.hasPowerGet() && RocmSmiBinding.PowerGet.rsmi_dev_power_get(dv, a, a + 8) == 0) {
                power = OptionalDouble.of(b.getLong(0) / 1_000_000.0);
            } else if (Core.rsmi_dev_power_ave_get(dv, 0, a) == 0) {
                power = OptionalDouble.of(b.getLong(0) / 1_000_000.0);
            }
            out.add(new GpuMetrics(devices.get(i).index(), busy, used, temp, power, now));
        }
        return new GpuSample(now, out);
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
