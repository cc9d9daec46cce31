package io.gpusched.core.sim;

import io.gpusched.core.ComputeCapability;
import io.gpusched.core.DeviceIdentifiers;
import io.gpusched.core.GpuConfigException;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.PcieLevel;
import io.gpusched.core.devices.CharMajors;
import io.gpusched.core.devices.GpuDeviceNodes;
import io.gpusched.core.internal.Durations;
import io.gpusched.core.internal.StrictYaml;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.UUID;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Reads a node described in YAML into a {@link SimulatedGpuInventory}. The built-in profiles are such files.
 * <pre>
 * node: my-node
 * description: 2x A100 on one PCIe switch
 * defaults: {vendor: NVIDIA, name: NVIDIA A100-PCIE-40GB, memory: 40GiB, compute_capability: "8.0"}
 * devices:
 *   - {index: 0, pci_bus_id: "00000000:17:00.0", numa_node: 0, pcie_switch: sw0}
 *   - {index: 1, pci_bus_id: "00000000:18:00.0", numa_node: 0, pcie_switch: sw0}
 * links: [[0, 1, 4]]          # NVLink/XGMI: [a, b, count]
 * fabric_links: 18            # optional: every pair linked all-to-all (an NVSwitch fabric) with this count
 * pcie: [[0, 1, SINGLE]]      # optional overrides; else derived: same pcie_switch SINGLE, same host_bridge
 *                             # HOSTBRIDGE, same numa_node NODE, otherwise SYSTEM
 * char_majors: {nvidia-uvm: 510, nvidia-caps: 235}   # optional: the node's /proc/devices majors
 * </pre>
 * Scripted usage (optional, per device; see {@link UsageTrace}): {@code usage: {step: 10s, utilization: [90, 0],
 * memory: [20GiB], power: [250, 60]}} (or {@code usage: training}, a {@link UsageTrace#preset preset}), processes
 * with their own traces {@code processes: [{pid: 4242, step: 10s, utilization: [40], memory: [8GiB]}]}, and
 * {@code energy_counter: false} for a GPU without the driver's energy counter (the default is true for NVIDIA compute
 * capability 7.0 (Volta) and later and for AMD, false for older NVIDIA GPUs, as the drivers behave).
 * A device's {@code uuid} defaults to a stable value derived from the node name and index, {@code minor} to its index.
 * {@code char_majors} are the node's own character-device majors, so that its device nodes (CDI specs, fences) never
 * depend on the machine it is simulated on; by default {@link #DEFAULT_CHAR_MAJORS} of its vendors (NVIDIA:
 * {@code nvidia-uvm} and {@code nvidia-caps}; AMD: {@code kfd}); {@code {}} describes a node whose modules are not
 * loaded. Every device carries them as the property {@value GpuDeviceNodes#CHAR_MAJORS_PROPERTY}.
 *
 * <p>Refused, naming the devices, so that one device's fence, gres.conf line or CDI entry never reaches another: two
 * devices of one vendor with one {@code minor}, or two devices with one {@code pci_bus_id} (in any spelling), unless
 * both are partitions of one parent; a {@code parent} that is the device itself or another device of the description
 * (a cycle, or a GPU allocatable whole and as its partitions: a parent is the physical GPU, which is listed either
 * whole or as its partitions); partitions of one parent on different PCI devices, or (NVIDIA) with different minors;
 * a pair given twice in {@code links} or {@code pcie}, or a {@code links} count other than {@code fabric_links}'.
 * Identifiers as {@link io.gpusched.core.DeviceIdentifiers} accepts them (a uuid is a plain token of at most 128
 * characters; names and properties printable text); the node's name and description printable too.
 */
public final class NodeDescriptions {

    /** Names of the built-in profiles. */
    public static final List<String> PROFILES = List.of("dgx1-v100", "dgx-h100", "pcie-4xa10", "mi210-8x");

    private static final Set<String> ROOT_KEYS =
            Set.of("node", "description", "driver_version", "defaults", "devices", "links", "fabric_links", "pcie",
                    "char_majors");
    private static final Set<String> DEVICE_KEYS = Set.of("index", "uuid", "vendor", "name", "memory",
            "compute_capability", "architecture", "pci_bus_id", "numa_node", "minor", "pcie_switch", "host_bridge",
            "parent", "driver_version", "properties", "usage", "processes", "energy_counter");
    private static final Set<String> USAGE_KEYS = Set.of("step", "utilization", "memory", "power");
    private static final Set<String> PROCESS_KEYS = Set.of("pid", "step", "utilization", "memory");

    /** The majors of a node's vendors when its description gives no {@code char_majors}. */
    public static final Map<GpuVendor, Map<String, Integer>> DEFAULT_CHAR_MAJORS = Map.of(
            GpuVendor.NVIDIA, Map.of("nvidia-uvm", 510, "nvidia-caps", 235), GpuVendor.AMD, Map.of("kfd", 237));

    /** Most devices one description may list: topology is derived per pair, so the cost grows with the square. */
    public static final int MAX_DEVICES = 1024;

    private NodeDescriptions() {
    }

    /**
     * @return the built-in profile of this name
     * @throws IllegalArgumentException naming the valid profiles
     */
    public static SimulatedGpuInventory profile(String name) {
        return profile(name, Clock.systemUTC());
    }

    /**
     * @param name  a built-in profile
     * @param clock the clock its samples, traces and energy counters follow (a demo replaying time, a test)
     * @return the built-in profile of this name
     * @throws IllegalArgumentException naming the valid profiles
     */
    public static SimulatedGpuInventory profile(String name, Clock clock) {
        Objects.requireNonNull(clock, "clock");
        if (!PROFILES.contains(name)) {
            throw new IllegalArgumentException("unknown simulated profile \"" + name + "\"; valid profiles are "
                    + PROFILES + " (or a path to a YAML node description)");
        }
        String resource = "/io/gpusched/core/sim/" + name + ".yaml";
        try (InputStream in = NodeDescriptions.class.getResourceAsStream(resource)) {
            Objects.requireNonNull(in, resource);
            return parse(new String(in.readAllBytes(), StandardCharsets.UTF_8), resource, clock);
        } catch (IOException e) {
            throw new IllegalStateException("cannot read built-in profile " + resource, e);
        }
    }

    /** @throws GpuConfigException if the file cannot be read, is larger than 3 MiB or describes an invalid node */
    public static SimulatedGpuInventory load(Path file) {
        return parse(StrictYaml.read(file, "node description"), file.toString());
    }

    /**
     * @param yaml   the description
     * @param source name for error messages
     * @throws GpuConfigException naming {@code source}, the key path of the first invalid setting and what would be
     *                            valid; also for text that is not YAML, tags other than plain scalars, lists and
     *                            mappings, and more than {@link #MAX_DEVICES} devices. No other exception is thrown
     *                            for any text.
     */
    public static SimulatedGpuInventory parse(String yaml, String source) {
        return parse(yaml, source, Clock.systemUTC());
    }

    /** As {@link #parse(String, String)}, the node following {@code clock}. */
    public static SimulatedGpuInventory parse(String yaml, String source, Clock clock) {
        StrictYaml root = StrictYaml.parse(yaml, source).onlyKeys(ROOT_KEYS);
        String node = root.requiredString("node");
        Optional<String> badName = DeviceIdentifiers.text(node, "the node name");
        if (badName.isPresent() || node.length() > 128) {
            throw root.error(root.pathOf("node"), badName.orElse("the node name is longer than 128 characters"));
        }
        DeviceIdentifiers.text(root.string("description", ""), "the description").ifPresent(p -> {
            throw root.error(root.pathOf("description"), p);
        });
        SimulatedGpuInventory.Builder b = SimulatedGpuInventory.builder(node)
                .description(root.string("description", "")).clock(clock);
        StrictYaml defaults = root.child("defaults").onlyKeys(DEVICE_KEYS);
        String driver = root.string("driver_version", null);
        List<StrictYaml> devices = root.maps("devices");
        if (devices.isEmpty()) {
            throw root.error(root.pathOf("devices"), "a node needs at least one device");
        }
        if (devices.size() > MAX_DEVICES) {
            throw root.error(root.pathOf("devices"), "has " + devices.size() + " devices; a node description may"
                    + " have at most " + MAX_DEVICES + " (pairs are derived for every two devices)");
        }
        List<GpuDevice> built = new ArrayList<>();
        Map<Integer, String[]> placement = new HashMap<>();
        Map<Integer, Integer> numa = new HashMap<>();
        Set<String> uuids = new HashSet<>();
        Map<Integer, GpuDevice> byIndex = new TreeMap<>();
        for (StrictYaml d : devices) {
            d.onlyKeys(DEVICE_KEYS);
            int index = d.requiredInteger("index", 0, 1 << 20);
            String at = root.pathOf("devices") + "[index " + index + "]";
            if (placement.containsKey(index)) {
                throw d.error(at, "index " + index + " clashes with an earlier device (given twice); expected each"
                        + " device index once");
            }
            String uuid = d.string("uuid", derivedUuid(node, index));
            if (!uuids.add(uuid)) {
                throw d.error(at, "uuid " + uuid + " clashes with an earlier device (given twice); expected a"
                        + " distinct uuid per device");
            }
            GpuDevice.Builder g = GpuDevice.builder().index(index)
                    .uuid(uuid)
                    .vendor(value(d, defaults, "vendor", GpuVendor::parse))
                    .name(value(d, defaults, "name", s -> s))
                    .memory(value(d, defaults, "memory", MemorySize::parse))
                    .pciBusId(d.requiredString("pci_bus_id"))
                    .minor(d.integer("minor", index, 0, 1 << 20));
            ComputeCapability cc = optional(d, defaults, "compute_capability", ComputeCapability::parse);
            if (cc != null) {
                g.computeCapability(cc);
            }
            String arch = optional(d, defaults, "architecture", s -> s);
            if (arch != null) {
                g.architecture(arch);
            }
            String dv = d.string("driver_version", driver);
            if (dv != null) {
                g.driverVersion(dv);
            }
            String parent = d.string("parent", null);
            if (parent != null) {
                g.parentUuid(parent);
            }
            if (d.has("numa_node")) {
                int n = d.integer("numa_node", -1, 0, 1023);
                g.numaNode(n);
                numa.put(index, n);
            }
            StrictYaml props = d.child("properties");
            if (props.has(GpuDeviceNodes.CHAR_MAJORS_PROPERTY)) {
                throw d.error(props.pathOf(GpuDeviceNodes.CHAR_MAJORS_PROPERTY), "is the node's: give char_majors at"
                        + " the top level of the description (e.g. char_majors: {nvidia-uvm: 510})");
            }
            for (String k : props.keys()) {
                g.property(k, props.string(k, ""));
            }
            placement.put(index, new String[]{d.string("pcie_switch", null), d.string("host_bridge", null)});
            GpuDevice dev;
            try {
                dev = g.build();
                DeviceIdentifiers.check(dev);
                built.add(dev);
                built(root, dev, byIndex);
            } catch (IllegalArgumentException e) {
                throw d.error(root.pathOf("devices") + "[index " + index + "]", e.getMessage());
            }
            boolean counterByDefault = dev.vendor() == GpuVendor.AMD || dev.vendor() == GpuVendor.NVIDIA
                    && dev.computeCapability().map(c -> c.major() >= 7).orElse(false);
            b.energyCounter(index, d.bool("energy_counter", counterByDefault));
            if (d.has("usage")) {
                b.trace(index, usage(d, "usage", dev));
            }
            Map<Integer, UsageTrace> procs = new HashMap<>();
            List<StrictYaml> pl = d.maps("processes");
            if (pl.size() > 64) {
                throw d.error(d.pathOf("processes"), "lists " + pl.size() + " processes; at most 64 per device");
            }
            for (StrictYaml pr : pl) {
                pr.onlyKeys(PROCESS_KEYS);
                int pid = pr.requiredInteger("pid", 1, 1 << 22);
                if (procs.put(pid, trace(pr, dev)) != null) {
                    throw pr.error(pr.pathOf("pid"), "pid " + pid + " is given twice on this device");
                }
            }
            if (!procs.isEmpty()) {
                b.processTraces(index, procs);
            }
        }
        String majors = charMajors(root, built).format();
        for (GpuDevice g : built) {
            b.device(g.toBuilder().property(GpuDeviceNodes.CHAR_MAJORS_PROPERTY, majors).build());
        }
        checkHardware(root, byIndex);
        checkMigIds(root, byIndex);
        derivePcie(b, placement, numa);
        int fabric = root.integer("fabric_links", 0, 0, 1024);
        Map<List<Integer>, String> pairs = new HashMap<>();
        if (fabric > 0) {
            List<Integer> idx = placement.keySet().stream().sorted().toList();
            for (int i = 0; i < idx.size(); i++) {
                for (int j = i + 1; j < idx.size(); j++) {
                    b.links(idx.get(i), idx.get(j), fabric);
                }
            }
        }
        List<List<Object>> links = root.rows("links");
        for (int i = 0; i < links.size(); i++) {
            List<Object> row = links.get(i);
            String at = root.pathOf("links") + "[" + i + "]";
            if (row.size() != 3 || !row.stream().allMatch(o -> o instanceof Integer)) {
                throw root.error(at, "expected [a, b, count] of whole numbers, was " + row);
            }
            int a = (Integer) row.get(0);
            int c = (Integer) row.get(1);
            requireDevice(root, at, placement, a, c);
            int count = (Integer) row.get(2);
            if (count < 0) {
                throw root.error(at, "the link count must be 0 or more, was " + count);
            }
            if (fabric > 0 && count != fabric) {
                throw root.error(at, "links devices " + a + " and " + c + " with " + count + " links, but fabric_links"
                        + " already links every pair with " + fabric + "; give each pair's count once");
            }
            once(root, at, pairs, a, c, row.toString(), "links");
            b.links(a, c, count);
        }
        List<List<Object>> pcie = root.rows("pcie");
        Map<List<Integer>, String> pcieOverrides = new HashMap<>();
        for (int i = 0; i < pcie.size(); i++) {
            List<Object> row = pcie.get(i);
            String at = root.pathOf("pcie") + "[" + i + "]";
            if (row.size() != 3 || !(row.get(0) instanceof Integer) || !(row.get(1) instanceof Integer)) {
                throw root.error(at, "expected [a, b, LEVEL], was " + row);
            }
            int a = (Integer) row.get(0);
            int c = (Integer) row.get(1);
            requireDevice(root, at, placement, a, c);
            once(root, at, pcieOverrides, a, c, row.toString(), "pcie");
            try {
                b.pcie(a, c, PcieLevel.parse(String.valueOf(row.get(2))));
            } catch (IllegalArgumentException e) {
                throw root.error(at, e.getMessage());
            }
        }
        try {
            return b.build();
        } catch (IllegalArgumentException e) {
            throw new GpuConfigException(source + ": " + e.getMessage(), e);
        }
    }

    /** The description's {@code char_majors}, or the defaults of its devices' vendors. */
    private static CharMajors charMajors(StrictYaml root, List<GpuDevice> devices) {
        if (!root.has("char_majors")) {
            Map<String, Integer> m = new TreeMap<>();
            devices.stream().map(GpuDevice::vendor).distinct()
                    .forEach(v -> m.putAll(DEFAULT_CHAR_MAJORS.getOrDefault(v, Map.of())));
            return CharMajors.of(m);
        }
        StrictYaml c = root.child("char_majors");
        Map<String, Integer> m = new TreeMap<>();
        for (String k : c.keys()) {
            m.put(k, c.requiredInteger(k, 1, CharMajors.MAX_MAJOR));
        }
        try {
            return CharMajors.of(m);
        } catch (IllegalArgumentException e) {
            throw root.error(root.pathOf("char_majors"), e.getMessage());
        }
    }

    /** Refuses a second entry for the pair {@code a, b} (in either order) in {@code key}, naming both entries. */
    private static void once(StrictYaml root, String at, Map<List<Integer>, String> seen, int a, int b, String entry,
            String key) {
        String before = seen.putIfAbsent(List.of(Math.min(a, b), Math.max(a, b)), entry);
        if (before != null) {
            throw root.error(at, "devices " + a + " and " + b + " are given twice in " + key + " (" + before + " and "
                    + entry + "); give each pair once, or the last would silently win");
        }
    }

    /** Keeps a built device, refusing one whose parent is itself. */
    private static void built(StrictYaml root, GpuDevice d, Map<Integer, GpuDevice> byIndex) {
        if (d.parentUuid().isPresent() && d.parentUuid().get().equals(d.uuid())) {
            throw new IllegalArgumentException("parent " + d.uuid() + " is the device itself; a partition's parent is"
                    + " the physical GPU it is cut from");
        }
        byIndex.put(d.index(), d);
    }

    /**
     * The rules that keep one device's fence, gres.conf line and CDI entry from reaching another device: no two devices
     * share a device node minor (per vendor) or a PCI bus id unless both are partitions of one parent; a parent is the
     * physical GPU, which is not itself a device of the description (not the device itself, not another device: that
     * would make a cycle, or the same GPU allocatable twice); all partitions of one parent sit on one PCI device, and
     * NVIDIA ones on one minor (MIG devices open their parent's {@code /dev/nvidiaN}).
     */
    private static void checkHardware(StrictYaml root, Map<Integer, GpuDevice> byIndex) {
        String at = root.pathOf("devices");
        Map<String, GpuDevice> byUuid = new HashMap<>();
        for (GpuDevice d : byIndex.values()) {
            byUuid.put(d.uuid(), d);
        }
        Map<String, GpuDevice> firstOfParent = new HashMap<>();
        for (GpuDevice d : byIndex.values()) {
            if (d.parentUuid().isEmpty()) {
                continue;
            }
            String p = d.parentUuid().get();
            GpuDevice listed = byUuid.get(p);
            if (listed != null) {
                boolean cycle = listed.parentUuid().isPresent();
                throw root.error(at + "[index " + d.index() + "]", "parent " + p + " is device " + listed.index()
                        + " of this node" + (cycle ? ", itself a partition (parent " + listed.parentUuid().get()
                                + "): a chain or cycle of parents"
                                : ": the same GPU would be allocatable whole and"
                                        + " as its partitions")
                        + "; a parent is the physical GPU, which a description lists either whole or as its"
                        + " partitions, not both");
            }
            GpuDevice first = firstOfParent.putIfAbsent(p, d);
            if (first != null && !pci(first).equals(pci(d))) {
                throw root.error(at + "[index " + d.index() + "]", "partitions " + first.index() + " and " + d.index()
                        + " of parent " + p + " sit on different PCI devices (" + first.pciBusId() + ", "
                        + d.pciBusId() + "); every partition of a GPU has its parent's pci_bus_id");
            }
            if (first != null && d.vendor() == GpuVendor.NVIDIA && !first.minor().equals(d.minor())) {
                throw root.error(at + "[index " + d.index() + "]", "MIG devices " + first.index() + " and " + d.index()
                        + " of parent " + p + " have different minors (" + minorText(first) + ", " + minorText(d)
                        + "); a MIG device opens its parent's /dev/nvidiaN, so all of one parent's have its minor");
            }
        }
        Map<String, GpuDevice> byMinor = new HashMap<>();
        Map<String, GpuDevice> byBus = new HashMap<>();
        for (GpuDevice d : byIndex.values()) {
            if (d.minor().isPresent()) {
                GpuDevice other = byMinor.putIfAbsent(d.vendor() + "/" + d.minor().getAsInt(), d);
                if (other != null && !sameParent(other, d)) {
                    throw root.error(at + "[index " + d.index() + "]", "minor " + d.minor().getAsInt() + " is also"
                            + " device " + other.index() + "'s (" + other.uuid() + "); a fence for one would open the"
                            + " other's device node, so only partitions of one parent share a minor");
                }
            }
            GpuDevice other = byBus.putIfAbsent(pci(d), d);
            if (other != null && !sameParent(other, d)) {
                throw root.error(at + "[index " + d.index() + "]", "pci_bus_id " + d.pciBusId() + " is also device "
                        + other.index() + "'s (" + other.uuid() + "); only partitions of one parent share a PCI"
                        + " device");
            }
        }
    }

    /**
     * NVIDIA partitions that give MIG ids ({@code mig.gpu_instance_id}) have ids inside the driver's table, spelled as
     * it writes them, one {@code nvml.index} per parent GPU and no two partitions with the same ids: their access caps
     * ({@code /dev/nvidia-caps/nvidia-cap<minor>}, numbered from the ids) are then their own, so a fence or CDI entry
     * for one never opens another's.
     */
    private static void checkMigIds(StrictYaml root, Map<Integer, GpuDevice> byIndex) {
        String at = root.pathOf("devices");
        Map<String, GpuDevice> byCaps = new HashMap<>();
        Map<String, String> gpuOfParent = new HashMap<>();
        Map<String, String> parentOfGpu = new HashMap<>();
        for (GpuDevice d : byIndex.values()) {
            Map<String, String> p = d.properties();
            if (d.vendor() != GpuVendor.NVIDIA || d.parentUuid().isEmpty() || !p.containsKey("mig.gpu_instance_id")) {
                continue;
            }
            String where = at + "[index " + d.index() + "]";
            String key;
            try {
                key = GpuDeviceNodes.checkMigIds(p.get("nvml.index"), p.get("mig.gpu_instance_id"),
                        p.get("mig.compute_instance_id"));
            } catch (IllegalArgumentException e) {
                throw root.error(where, "MIG device " + d.uuid() + ": " + e.getMessage());
            }
            String parent = d.parentUuid().get();
            String gpu = p.get("nvml.index");
            String had = gpuOfParent.putIfAbsent(parent, gpu);
            if (had != null && !had.equals(gpu)) {
                throw root.error(where, "MIG device " + d.uuid() + " of parent " + parent + " gives nvml.index " + gpu
                        + ", another of its partitions " + had + "; one GPU has one nvml.index");
            }
            String owner = parentOfGpu.putIfAbsent(gpu, parent);
            if (owner != null && !owner.equals(parent)) {
                throw root.error(where, "MIG device " + d.uuid() + " gives nvml.index " + gpu + ", which is parent "
                        + owner + "'s; two GPUs never share an nvml.index (their partitions would share access caps)");
            }
            GpuDevice other = byCaps.putIfAbsent(key, d);
            if (other != null) {
                throw root.error(where, "MIG device " + d.uuid() + " has the ids " + key + " of device "
                        + other.index() + " (" + other.uuid() + "); a fence for one would open the other's access"
                        + " caps, so no two partitions share their ids");
            }
        }
    }

    private static boolean sameParent(GpuDevice a, GpuDevice b) {
        return a.parentUuid().isPresent() && a.parentUuid().equals(b.parentUuid());
    }

    private static String minorText(GpuDevice d) {
        return d.minor().isPresent() ? String.valueOf(d.minor().getAsInt()) : "none";
    }

    /** @return the PCI bus id in one form: lower case, an 8-digit domain ({@code 0000:17:00.0} = 00000000:17:00.0) */
    static String pci(GpuDevice d) {
        String s = d.pciBusId().toLowerCase(Locale.ROOT);
        Matcher m = BDF.matcher(s);
        if (m.matches()) {
            return String.format(Locale.ROOT, "%08x:%s:%s.%s", Long.parseLong(m.group(1), 16), m.group(2), m.group(3),
                    m.group(4));
        }
        return s;
    }

    private static final Pattern BDF = Pattern.compile("([0-9a-f]{1,8}):([0-9a-f]{2}):([0-9a-f]{2})\\.([0-7])");

    /** @return the trace under {@code key}: a preset name or a mapping of step and value lists */
    private static UsageTrace usage(StrictYaml d, String key, GpuDevice device) {
        Object raw = d.raw(key);
        if (!(raw instanceof Map)) {
            String name = d.string(key, "");
            try {
                return UsageTrace.preset(name, device.memory());
            } catch (IllegalArgumentException e) {
                throw d.error(d.pathOf(key), e.getMessage() + ", or a mapping {step, utilization, memory, power}");
            }
        }
        return trace(d.child(key).onlyKeys(USAGE_KEYS), device);
    }

    private static UsageTrace trace(StrictYaml t, GpuDevice device) {
        Duration step = t.parsed("step", Durations::parse, Duration.ofSeconds(10));
        List<Double> util = numbers(t, "utilization");
        if (util.isEmpty()) {
            throw t.error(t.pathOf("utilization"), "is required: a list of percentages such as [90, 0]");
        }
        List<MemorySize> mem = new ArrayList<>();
        List<String> ms = t.strings("memory");
        for (int i = 0; i < ms.size(); i++) {
            try {
                MemorySize m = MemorySize.parse(ms.get(i));
                if (!device.memory().isAtLeast(m)) {
                    throw new IllegalArgumentException(m + " is more than the device's " + device.memory());
                }
                mem.add(m);
            } catch (IllegalArgumentException e) {
                throw t.error(t.pathOf("memory") + "[" + i + "]", e.getMessage());
            }
        }
        List<Double> power = t.has("power") ? numbers(t, "power") : List.of();
        try {
            return new UsageTrace(step, util, mem, power);
        } catch (IllegalArgumentException e) {
            throw t.error(t.pathOf("utilization"), e.getMessage());
        }
    }

    private static List<Double> numbers(StrictYaml t, String key) {
        List<String> raw = t.strings(key);
        if (raw.size() > UsageTrace.MAX_STEPS) {
            throw t.error(t.pathOf(key), "has " + raw.size() + " values; at most " + UsageTrace.MAX_STEPS);
        }
        List<Double> out = new ArrayList<>();
        for (int i = 0; i < raw.size(); i++) {
            String v = raw.get(i);
            try {
                if (!v.matches("[0-9]{1,6}(\\.[0-9]{1,6})?")) {
                    throw new NumberFormatException();
                }
                out.add(Double.parseDouble(v));
            } catch (NumberFormatException e) {
                throw t.error(t.pathOf(key) + "[" + i + "]", "\"" + v + "\" is not a number such as 42 or 97.5");
            }
        }
        return out;
    }

    private static void requireDevice(StrictYaml root, String at, Map<Integer, ?> devices, int a, int b) {
        if (a == b || !devices.containsKey(a) || !devices.containsKey(b)) {
            throw root.error(at, "must name two distinct devices of this node " + devices.keySet()
                    + ", named " + a + " and " + b);
        }
    }

    private static void derivePcie(SimulatedGpuInventory.Builder b, Map<Integer, String[]> placement,
            Map<Integer, Integer> numa) {
        List<Integer> idx = placement.keySet().stream().sorted().toList();
        for (int i = 0; i < idx.size(); i++) {
            for (int j = i + 1; j < idx.size(); j++) {
                String[] p = placement.get(idx.get(i));
                String[] q = placement.get(idx.get(j));
                PcieLevel level;
                if (p[0] != null && p[0].equals(q[0])) {
                    level = PcieLevel.SINGLE;
                } else if (p[1] != null && p[1].equals(q[1])) {
                    level = PcieLevel.HOSTBRIDGE;
                } else if (numa.containsKey(idx.get(i)) && numa.get(idx.get(i)).equals(numa.get(idx.get(j)))) {
                    level = PcieLevel.NODE;
                } else {
                    level = PcieLevel.SYSTEM;
                }
                b.pcie(idx.get(i), idx.get(j), level);
            }
        }
    }

    private static <T> T value(StrictYaml d, StrictYaml defaults, String key, Function<String, T> f) {
        T v = optional(d, defaults, key, f);
        if (v == null) {
            throw d.error(d.pathOf(key), "is required (here or under defaults)");
        }
        return v;
    }

    private static <T> T optional(StrictYaml d, StrictYaml defaults, String key,
            Function<String, T> f) {
        return d.has(key) ? d.parsed(key, f, null) : defaults.parsed(key, f, null);
    }

    /** @return a stable, NVIDIA-shaped UUID for a simulated device */
    static String derivedUuid(String node, int index) {
        return "GPU-" + UUID.nameUUIDFromBytes((node + "/" + index).getBytes(StandardCharsets.UTF_8));
    }
}
