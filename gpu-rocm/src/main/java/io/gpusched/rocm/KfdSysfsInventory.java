package io.gpusched.rocm;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.GpuSample;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.PcieLevel;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.OptionalInt;
import java.util.stream.Stream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * AMD GPUs from sysfs alone: the KFD topology for devices and links, {@code /sys/class/drm} for live metrics. Pure
 * Java; every root configurable. Device indices follow PCI bus order (as ROCm 6 does), not KFD node order; the KFD
 * node of each device is kept in its {@code kfd.node} property. Nodes sharing a {@code unique_id} are partitions of
 * one physical GPU (CPX/NPS): each is an allocatable child with its own render node, and the parent is described in
 * their properties, never allocated itself.
 */
public final class KfdSysfsInventory implements GpuInventory {
    private static final Logger LOG = LoggerFactory.getLogger(KfdSysfsInventory.class);

    private final Path sysfsRoot;
    private final List<GpuDevice> devices;
    private final GpuTopology topology;
    private final List<String> problems;
    private final Clock clock;

    private KfdSysfsInventory(Path sysfsRoot, List<GpuDevice> devices, GpuTopology topology, List<String> problems,
                              Clock clock) {
        this.sysfsRoot = sysfsRoot;
        this.devices = List.copyOf(devices);
        this.topology = topology;
        this.problems = List.copyOf(problems);
        this.clock = clock;
    }

    /**
     * Reads the KFD topology under {@code sysfsRoot}.
     *
     * @throws io.gpusched.core.BackendUnavailableException when there is no topology or no GPU node
     */
    public static KfdSysfsInventory open(Path sysfsRoot, Clock clock) {
        KfdTopology t = KfdTopology.read(sysfsRoot).orElseThrow(() ->
                new io.gpusched.core.BackendUnavailableException("no KFD topology at "
                        + sysfsRoot.resolve("class/kfd/kfd/topology/nodes") + " (amdgpu not loaded)"));
        return from(t, sysfsRoot, clock);
    }

    /** Builds the inventory from a topology read elsewhere (tests, captures). */
    public static KfdSysfsInventory from(KfdTopology t, Path sysfsRoot, Clock clock) {
        List<String> problems = new ArrayList<>(t.problems());
        List<KfdTopology.Node> gpus = new ArrayList<>();
        Map<Long, Integer> renderOwner = new HashMap<>();
        for (KfdTopology.Node n : t.gpuNodes()) {
            OptionalInt render = renderMinor(n);
            if (n.get("location_id").isEmpty() || render.isEmpty()) {
                problems.add("KFD node " + n.id() + " lacks location_id or drm_render_minor: skipped");
                continue;
            }
            Integer other = renderOwner.putIfAbsent((long) render.getAsInt(), n.id());
            if (other != null) {
                problems.add("KFD nodes " + other + " and " + n.id() + " both claim renderD" + render.getAsInt()
                        + ": node " + n.id() + " skipped");
                continue;
            }
            gpus.add(n);
        }
        if (gpus.isEmpty()) {
            throw new io.gpusched.core.BackendUnavailableException("the KFD topology at " + t.root()
                    + " lists no usable GPU node" + (problems.isEmpty() ? "" : " (" + problems.get(0) + ")"));
        }
        gpus.sort(Comparator.comparingLong((KfdTopology.Node n) -> n.get("domain").orElse(0))
                .thenComparingLong(n -> (n.get("location_id").getAsLong() >> 3))
                .thenComparingLong(n -> n.get("location_id").getAsLong() & 7));
        Map<String, Integer> byAddress = new HashMap<>();
        for (KfdTopology.Node n : gpus) {
            String address = n.get("domain").orElse(0) + ":" + n.get("location_id").getAsLong();
            Integer other = byAddress.putIfAbsent(address, n.id());
            if (other != null) {
                problems.add("KFD nodes " + other + " and " + n.id() + " share PCI location " + address
                        + " (a copied node?); both kept, they have their own render nodes");
            }
        }
        Map<Long, Integer> perUnique = new HashMap<>();
        for (KfdTopology.Node n : gpus) {
            long u = n.get("unique_id").orElse(0);
            if (u != 0) {
                perUnique.merge(u, 1, Integer::sum);
            }
        }
        Map<Integer, Integer> indexOfNode = new LinkedHashMap<>();
        List<GpuDevice> devices = new ArrayList<>();
        for (int i = 0; i < gpus.size(); i++) {
            KfdTopology.Node n = gpus.get(i);
            indexOfNode.put(n.id(), i);
            devices.add(device(i, n, perUnique, sysfsRoot, t));
        }
        GpuTopology.Builder tb = GpuTopology.builder(devices);
        for (KfdTopology.Node n : gpus) {
            int a = indexOfNode.get(n.id());
            for (KfdTopology.IoLink l : n.ioLinks()) {
                Integer b = indexOfNode.get((int) l.to());
                if (l.type() == KfdTopology.LINK_XGMI && b != null && b != a) {
                    tb.links(a, b, 1);
                }
            }
        }
        for (int a = 0; a < devices.size(); a++) {
            for (int b = a + 1; b < devices.size(); b++) {
                Optional<String> pa = devices.get(a).parentUuid();
                if (pa.isPresent() && pa.equals(devices.get(b).parentUuid())) {
                    tb.pcie(a, b, PcieLevel.INTERNAL);
                    tb.links(a, b, 0);
                }
            }
        }
        if (!problems.isEmpty()) {
            LOG.debug("KFD topology problems: {}", problems);
        }
        return new KfdSysfsInventory(sysfsRoot, devices, tb.build(), problems, clock);
    }

    private static OptionalInt renderMinor(KfdTopology.Node n) {
        return n.get("drm_render_minor").isPresent() ? OptionalInt.of((int) n.get("drm_render_minor").getAsLong())
                : OptionalInt.empty();
    }

    private static GpuDevice device(int index, KfdTopology.Node n, Map<Long, Integer> perUnique, Path sysfs,
                                    KfdTopology t) {
        long loc = n.get("location_id").getAsLong();
        long domain = n.get("domain").orElse(0);
        int partition = (int) (loc & 7);
        String bdf = String.format(Locale.ROOT, "%04x:%02x:%02x.0", domain, (loc >> 8) & 0xFF, (loc >> 3) & 0x1F);
        long unique = n.get("unique_id").orElse(0);
        boolean partitioned = unique != 0 && perUnique.getOrDefault(unique, 0) > 1;
        String physical = unique != 0 ? String.format(Locale.ROOT, "GPU-%016x", unique) : "AMD-" + bdf;
        long deviceId = n.get("device_id").orElse(0);
        String name = productName(sysfs, renderMinor(n).getAsInt()).orElse(AmdDeviceNames.name(deviceId));
        long memory = n.memBank0().isPresent() && n.memBank0().getAsLong() > 0 ? n.memBank0().getAsLong()
                : n.get("local_mem_size").orElse(0);
        GpuDevice.Builder b = GpuDevice.builder().index(index).vendor(GpuVendor.AMD)
                .name(partitioned ? name + " (partition " + partition + ")" : name)
                .memory(MemorySize.ofBytes(memory)).pciBusId(bdf).minor(renderMinor(n).getAsInt())
                .property("kfd.node", String.valueOf(n.id()))
                .property("device_id", String.format(Locale.ROOT, "0x%04x", deviceId))
                .property("location_id", String.valueOf(loc));
        if (partitioned) {
            b.uuid(String.format(Locale.ROOT, "AMD-PART-%016x-%d", unique, partition)).parentUuid(physical)
                    .property("partition_index", String.valueOf(partition))
                    .property("partitions", String.valueOf(perUnique.get(unique)));
        } else {
            b.uuid(physical);
        }
        n.get("gfx_target_version").ifPresent(v -> b.architecture(KfdTopology.gfxTarget(v)));
        n.get("hive_id").ifPresent(h -> {
            if (h != 0) {
                b.property("hive_id", Long.toUnsignedString(h));
            }
        });
        numaNode(sysfs, bdf, n, t).ifPresent(b::numaNode);
        return b.build();
    }

    private static Optional<String> productName(Path sysfs, int render) {
        Path p = sysfs.resolve("class/drm/renderD" + render + "/device/product_name");
        try {
            String s = Files.isRegularFile(p) ? Files.readString(p).trim() : "";
            return s.isEmpty() ? Optional.empty() : Optional.of(s);
        } catch (IOException e) {
            return Optional.empty();
        }
    }

    /** sysfs {@code numa_node} of the PCI device, else the CPU node its PCIe io_link leads to. */
    private static OptionalInt numaNode(Path sysfs, String bdf, KfdTopology.Node n, KfdTopology t) {
        OptionalInt fromSysfs = io.gpusched.core.internal.PciSysfs.numaNode(sysfs, bdf);
        if (fromSysfs.isPresent()) {
            return fromSysfs;
        }
        for (KfdTopology.IoLink l : n.ioLinks()) {
            if (l.type() == KfdTopology.LINK_PCIE) {
                for (KfdTopology.Node cpu : t.nodes()) {
                    if (cpu.id() == l.to() && !cpu.isGpu()) {
                        return OptionalInt.of(cpu.id());
                    }
                }
            }
        }
        return OptionalInt.empty();
    }

    /** @return KFD problems seen while reading (malformed lines, duplicate render nodes…) */
    public List<String> problems() {
        return problems;
    }

    @Override
    public String backend() {
        return "amd-sysfs";
    }

    @Override
    public List<GpuDevice> devices() {
        return devices;
    }

    @Override
    public GpuTopology topology() {
        return topology;
    }

    /** Reads {@code /sys/class/drm/renderD<minor>/device}: busy %, VRAM used, hwmon temperature and power. */
    @Override
    public GpuSample sample() {
        Instant now = clock.instant();
        List<GpuMetrics> out = new ArrayList<>(devices.size());
        for (GpuDevice d : devices) {
            out.add(DrmMetrics.read(sysfsRoot.resolve("class/drm/renderD" + d.minor().getAsInt() + "/device"),
                    d.index(), now));
        }
        return new GpuSample(now, out);
    }

    @Override
    public void close() {
    }

    @Override
    public String toString() {
        return "amd-sysfs (" + devices.size() + " devices)";
    }

    /** Metrics of one DRM device directory. */
    static final class DrmMetrics {
        private DrmMetrics() {
        }

        static GpuMetrics read(Path dev, int index, Instant now) {
            OptionalDouble busy = number(dev.resolve("gpu_busy_percent"));
            OptionalDouble used = number(dev.resolve("mem_info_vram_used"));
            OptionalDouble temp = OptionalDouble.empty();
            OptionalDouble power = OptionalDouble.empty();
            Path hwmonDir = dev.resolve("hwmon");
            if (Files.isDirectory(hwmonDir)) {
                try (Stream<Path> s = Files.list(hwmonDir)) {
                    for (Path h : s.sorted().toList()) {
                        if (temp.isEmpty()) {
                            temp = temperature(h);
                        }
                        if (power.isEmpty()) {
                            OptionalDouble uw = number(h.resolve("power1_average"));
                            power = uw.isPresent() ? uw : number(h.resolve("power1_input"));
                            if (power.isPresent()) {
                                power = OptionalDouble.of(power.getAsDouble() / 1_000_000.0);
                            }
                        }
                    }
                } catch (IOException ignored) {
                    // no hwmon
                }
            }
            return new GpuMetrics(index, busy,
                    used.isPresent() ? Optional.of(MemorySize.ofBytes((long) used.getAsDouble())) : Optional.empty(),
                    temp, power, now);
        }

        /** edge, else junction, else the first temp*_input; millidegrees. */
        private static OptionalDouble temperature(Path hwmon) {
            Map<String, OptionalDouble> byLabel = new LinkedHashMap<>();
            for (int i = 1; i <= 8; i++) {
                Path input = hwmon.resolve("temp" + i + "_input");
                if (!Files.isRegularFile(input)) {
                    continue;
                }
                String label = "temp" + i;
                try {
                    Path l = hwmon.resolve("temp" + i + "_label");
                    if (Files.isRegularFile(l)) {
                        label = Files.readString(l).trim();
                    }
                } catch (IOException ignored) {
                    // unlabeled
                }
                OptionalDouble v = number(input);
                if (v.isPresent()) {
                    byLabel.put(label, OptionalDouble.of(v.getAsDouble() / 1000.0));
                }
            }
            for (String want : List.of("edge", "junction")) {
                if (byLabel.containsKey(want)) {
                    return byLabel.get(want);
                }
            }
            return byLabel.values().stream().findFirst().orElse(OptionalDouble.empty());
        }

        private static OptionalDouble number(Path f) {
            try {
                if (!Files.isRegularFile(f)) {
                    return OptionalDouble.empty();
                }
                String s = Files.readString(f).trim();
                return s.matches("-?[0-9]{1,20}") ? OptionalDouble.of(Double.parseDouble(s)) : OptionalDouble.empty();
            } catch (IOException e) {
                return OptionalDouble.empty();
            }
        }
    }
}
