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
import io.gpusched.core.PcieLevel;
import io.gpusched.core.ProcessUsageSample;
import io.gpusched.core.internal.PciSysfs;
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
import java.util.OptionalLong;
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
        KfdTopology t =
                KfdTopology.read(sysfsRoot).orElseThrow(() -> new BackendUnavailableException("no KFD topology at "
                        + sysfsRoot.resolve("class/kfd/kfd/topology/nodes") + " (amdgpu not loaded)"));
        return from(t, sysfsRoot, clock);
    }

    /** Builds the inventory from a topology read elsewhere (tests, captures). */
    public static KfdSysfsInventory from(KfdTopology t, Path sysfsRoot, Clock clock) {
        List<String> problems = new ArrayList<>(t.problems());
        List<KfdTopology.Node> gpus = new ArrayList<>();
        Map<Long, Integer> renderOwner = new HashMap<>();
        for (KfdTopology.Node n : t.gpuNodes()) {
            Optional<String> bad = unusable(n);
            if (bad.isPresent()) {
                problems.add("KFD GPU node " + n.id() + ": " + bad.get() + "; node skipped, the others are served");
                continue;
            }
            int render = (int) n.get("drm_render_minor").getAsLong();
            Integer other = renderOwner.putIfAbsent((long) render, n.id());
            if (other != null) {
                problems.add("KFD nodes " + other + " and " + n.id() + " both claim renderD" + render
                        + ": node " + n.id() + " skipped");
                continue;
            }
            gpus.add(n);
        }
        if (gpus.isEmpty()) {
            throw new BackendUnavailableException("the KFD topology at " + t.root()
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
        List<KfdTopology.Node> kept = new ArrayList<>();
        for (KfdTopology.Node n : gpus) {
            GpuDevice d;
            try {
                d = device(devices.size(), n, perUnique, sysfsRoot, t, problems);
            } catch (RuntimeException e) {
                problems.add("KFD GPU node " + n.id() + ": " + e.getMessage() + "; node skipped");
                continue;
            }
            String uuid = d.uuid();
            if (devices.stream().anyMatch(x -> x.uuid().equals(uuid))) {
                d = d.toBuilder().uuid(uuid + "-kfd" + n.id()).build();
                problems.add("KFD GPU node " + n.id() + " has the identity " + uuid
                        + " of another node (a copied node?):"
                        + " listed as " + d.uuid());
            }
            indexOfNode.put(n.id(), devices.size());
            devices.add(d);
            kept.add(n);
        }
        if (devices.isEmpty()) {
            throw new BackendUnavailableException("the KFD topology at " + t.root()
                    + " lists no usable GPU node (" + problems.get(problems.size() - 1) + ")");
        }
        GpuTopology topology = links(devices, kept, indexOfNode);
        if (!problems.isEmpty()) {
            LOG.warn("KFD topology at {}: {} problem(s): {}", t.root(), problems.size(), problems);
        }
        return new KfdSysfsInventory(sysfsRoot, devices, topology, problems, clock);
    }

    /** Largest DRM minor the kernel hands out ({@code MINORMASK}). */
    static final long MAX_DRM_MINOR = (1L << 20) - 1;

    /** @return why a GPU node cannot be served (missing or out-of-range location or render minor), if it cannot */
    private static Optional<String> unusable(KfdTopology.Node n) {
        OptionalLong render = n.get("drm_render_minor");
        OptionalLong loc = n.get("location_id");
        if (loc.isEmpty() || render.isEmpty()) {
            return Optional.of("lacks " + (loc.isEmpty() ? "location_id" : "drm_render_minor"));
        }
        if (render.getAsLong() < 1 || render.getAsLong() > MAX_DRM_MINOR) {
            return Optional.of("drm_render_minor " + Long.toUnsignedString(render.getAsLong())
                    + " is out of range (1.." + MAX_DRM_MINOR + ")");
        }
        if (loc.getAsLong() < 0 || loc.getAsLong() > 0xFFFF) {
            return Optional.of("location_id " + Long.toUnsignedString(loc.getAsLong())
                    + " is out of range (0..65535: bus << 8 | device << 3 | function)");
        }
        long domain = n.get("domain").orElse(0);
        if (domain < 0 || domain > 0xFFFF_FFFFL) {
            return Optional.of("domain " + Long.toUnsignedString(domain) + " is out of range (0..4294967295)");
        }
        return Optional.empty();
    }

    /** Largest memory size believed (16 TiB per GPU or partition); anything above is a bad value, not memory. */
    static final long MAX_MEMORY_BYTES = 1L << 44;

    /**
     * XGMI links as closeness ranks derived from io_link weights (lower weight = closer): a pair whose lightest XGMI
     * io_link has weight {@code w} gets {@code max(1, round(wmax / w))} links (at most 16) where {@code wmax} is the
     * heaviest XGMI weight on the node, so equal weights
     * (MI210 hives) give 1 link and MI300/MI308 CPX partitions of one package (weight 13 against 41 across packages)
     * get 3. Partitions of one physical GPU are on the same board ({@link PcieLevel#INTERNAL}) and never get fewer
     * links than any of them has to another package, so they are always each other's closest peers.
     */
    private static GpuTopology links(List<GpuDevice> devices, List<KfdTopology.Node> nodes,
            Map<Integer, Integer> indexOfNode) {
        int n = devices.size();
        long[][] weight = new long[n][n];
        long wmax = 0;
        for (KfdTopology.Node node : nodes) {
            int a = indexOfNode.get(node.id());
            for (KfdTopology.IoLink l : node.ioLinks()) {
                if (l.type() != KfdTopology.LINK_XGMI || l.to() < 0 || l.to() > Integer.MAX_VALUE) {
                    continue;
                }
                Integer b = indexOfNode.get((int) l.to());
                if (b == null || b == a) {
                    continue;
                }
                long w = l.weight() > 0 ? l.weight() : 1;
                for (int[] p : new int[][]{{a, b}, {b, a}}) {
                    weight[p[0]][p[1]] = weight[p[0]][p[1]] == 0 ? w : Math.min(weight[p[0]][p[1]], w);
                }
                wmax = Math.max(wmax, w);
            }
        }
        int[][] count = new int[n][n];
        for (int a = 0; a < n; a++) {
            for (int b = 0; b < n; b++) {
                if (weight[a][b] > 0) {
                    count[a][b] = (int) Math.max(1, Math.min(16, Math.round((double) wmax / weight[a][b])));
                }
            }
        }
        int[] farthestBest = new int[n];
        for (int a = 0; a < n; a++) {
            for (int b = 0; b < n; b++) {
                if (a != b && !sameParent(devices.get(a), devices.get(b))) {
                    farthestBest[a] = Math.max(farthestBest[a], count[a][b]);
                }
            }
        }
        GpuTopology.Builder tb = GpuTopology.builder(devices);
        for (int a = 0; a < n; a++) {
            for (int b = a + 1; b < n; b++) {
                int c = count[a][b];
                if (sameParent(devices.get(a), devices.get(b))) {
                    tb.pcie(devices.get(a).index(), devices.get(b).index(), PcieLevel.INTERNAL);
                    c = Math.max(c, Math.max(farthestBest[a], farthestBest[b]));
                }
                if (c > 0) {
                    tb.links(devices.get(a).index(), devices.get(b).index(), c);
                }
            }
        }
        return tb.build();
    }

    private static boolean sameParent(GpuDevice a, GpuDevice b) {
        return a.parentUuid().isPresent() && a.parentUuid().equals(b.parentUuid());
    }

    private static GpuDevice device(int index, KfdTopology.Node n, Map<Long, Integer> perUnique, Path sysfs,
            KfdTopology t, List<String> problems) {
        long loc = n.get("location_id").getAsLong();
        long domain = n.get("domain").orElse(0);
        int render = (int) n.get("drm_render_minor").getAsLong();
        int partition = (int) (loc & 7);
        String bdf = String.format(Locale.ROOT, "%04x:%02x:%02x.0", domain, (loc >> 8) & 0xFF, (loc >> 3) & 0x1F);
        long unique = n.get("unique_id").orElse(0);
        boolean partitioned = unique != 0 && perUnique.getOrDefault(unique, 0) > 1;
        String physical = unique != 0 ? String.format(Locale.ROOT, "GPU-%016x", unique) : "AMD-" + bdf;
        long deviceId = n.get("device_id").orElse(0);
        String name = productName(sysfs, render).orElse(AmdDeviceNames.name(deviceId));
        OptionalLong memory = memory(n, problems);
        GpuDevice.Builder b = GpuDevice.builder().index(index).vendor(GpuVendor.AMD)
                .name(partitioned ? name + " (partition " + partition + ")" : name)
                .pciBusId(bdf).minor(render)
                .property("kfd.node", String.valueOf(n.id()))
                .property("device_id", String.format(Locale.ROOT, "0x%04x", deviceId))
                .property("location_id", String.valueOf(loc)).property("kfd.domain", String.valueOf(domain));
        if (memory.isPresent()) {
            b.memory(MemorySize.ofBytes(memory.getAsLong()));
        } else {
            b.memoryUnknown();
        }
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

    /**
     * {@code mem_banks/0} size, else {@code local_mem_size}; empty (and a problem) when neither is a believable size.
     */
    private static OptionalLong memory(KfdTopology.Node n, List<String> problems) {
        List<String> seen = new ArrayList<>();
        if (n.memBank0().isPresent()) {
            long v = n.memBank0().getAsLong();
            if (v > 0 && v <= MAX_MEMORY_BYTES) {
                return OptionalLong.of(v);
            }
            seen.add("mem_banks/0 size_in_bytes " + Long.toUnsignedString(v));
        }
        OptionalLong local = n.get("local_mem_size");
        if (local.isPresent()) {
            long v = local.getAsLong();
            if (v > 0 && v <= MAX_MEMORY_BYTES) {
                return OptionalLong.of(v);
            }
            seen.add("local_mem_size " + Long.toUnsignedString(v));
        }
        problems.add("KFD GPU node " + n.id() + ": memory size unknown (" + (seen.isEmpty()
                ? "no mem_banks/0 size_in_bytes and no local_mem_size" : String.join(", ", seen)
                        + ", expected 1.." + MAX_MEMORY_BYTES + " bytes")
                + "); memory-constrained requests cannot use it");
        return OptionalLong.empty();
    }

    private static Optional<String> productName(Path sysfs, int render) {
        Path p = sysfs.resolve("class/drm/renderD" + render + "/device/product_name");
        try {
            String s = Files.isRegularFile(p) ? KfdTopology.readBounded(p).trim() : "";
            return s.isEmpty() ? Optional.empty() : Optional.of(s);
        } catch (IOException e) {
            return Optional.empty();
        }
    }

    /** sysfs {@code numa_node} of the PCI device, else the CPU node its PCIe io_link leads to. */
    private static OptionalInt numaNode(Path sysfs, String bdf, KfdTopology.Node n, KfdTopology t) {
        OptionalInt fromSysfs = PciSysfs.numaNode(sysfs, bdf);
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
            GpuMetrics m;
            try {
                m = DrmMetrics.read(sysfsRoot.resolve("class/drm/renderD" + d.minor().getAsInt() + "/device"),
                        d.index(), now, d.memoryKnown() ? d.memory().bytes() : MAX_MEMORY_BYTES);
            } catch (RuntimeException e) { // one device's odd files never cost the others their metrics
                m = GpuMetrics.unavailable(d.index(), now);
            }
            out.add(m);
        }
        return new GpuSample(now, out);
    }

    /**
     * The processes using a device and their VRAM, from the KFD's {@code proc/<pid>/vram_<gpu_id>} files; per-process
     * utilization is not measured ({@link KfdProcesses#UTILIZATION_NOT_MEASURED}).
     *
     * @return the sample; empty where the sysfs shows no KFD {@code proc} directory or the device's {@code gpu_id}
     */
    @Override
    public Optional<ProcessUsageSample> processUsage(GpuDevice device) {
        OptionalLong gpuId = KfdProcesses.gpuId(sysfsRoot, device);
        if (gpuId.isEmpty() || devices.stream().noneMatch(d -> d.uuid().equals(device.uuid()))) {
            return Optional.empty();
        }
        return KfdProcesses.vram(sysfsRoot, gpuId.getAsLong()).map(vram -> {
            List<GpuProcessUsage> ps = new ArrayList<>();
            vram.forEach((pid, bytes) -> ps.add(new GpuProcessUsage(pid, OptionalDouble.empty(),
                    Optional.of(MemorySize.ofBytes(bytes)))));
            return new ProcessUsageSample(clock.instant(), ps, Optional.of(KfdProcesses.UTILIZATION_NOT_MEASURED),
                    Optional.empty());
        });
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

        /** Largest board power believed, in watts; anything above is a bad value. */
        private static final double MAX_POWER_WATTS = 10_000;

        /** @param maxBytes VRAM used above this (the device's memory) is a bad value, not a reading */
        static GpuMetrics read(Path dev, int index, Instant now, long maxBytes) {
            OptionalDouble busy = within(number(dev.resolve("gpu_busy_percent")), 0, 100);
            OptionalDouble used = within(number(dev.resolve("mem_info_vram_used")), 0, maxBytes);
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
            temp = within(temp, -273.15, 1000);
            power = within(power, 0, MAX_POWER_WATTS);
            return new GpuMetrics(index, busy,
                    used.isPresent() ? Optional.of(MemorySize.ofBytes((long) used.getAsDouble())) : Optional.empty(),
                    temp, power, now);
        }

        /** @return {@code v} when it lies in [lo, hi]; a value outside is a bad reading, not a fact */
        private static OptionalDouble within(OptionalDouble v, double lo, double hi) {
            return v.isPresent() && v.getAsDouble() >= lo && v.getAsDouble() <= hi ? v : OptionalDouble.empty();
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
                        label = KfdTopology.readBounded(l).trim();
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
                String s = KfdTopology.readBounded(f).trim();
                return s.matches("-?[0-9]{1,20}") ? OptionalDouble.of(Double.parseDouble(s)) : OptionalDouble.empty();
            } catch (IOException e) {
                return OptionalDouble.empty();
            }
        }
    }
}
