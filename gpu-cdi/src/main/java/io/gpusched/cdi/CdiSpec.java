package io.gpusched.cdi;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuException;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.devices.DeviceNode;
import io.gpusched.core.devices.DevicePlan;
import io.gpusched.core.devices.GpuDeviceNodes;
import io.gpusched.core.host.ConfigFiles;
import io.gpusched.core.internal.Json;
import io.gpusched.core.internal.Printable;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;
import org.yaml.snakeyaml.DumperOptions;
import org.yaml.snakeyaml.Yaml;

/**
 * A CDI (Container Device Interface) spec for one vendor's GPUs on a node, as {@code podman run --device
 * nvidia.com/gpu=0}, CRI-O, containerd and Docker read it from {@code /etc/cdi} or {@code /var/run/cdi}.
 * <p>
 * One device per GPU and per MIG/AMD partition, named by its gpusched index ({@code 0}) and its UUID
 * ({@code GPU-…}, {@code MIG-…}); a MIG device also by {@code <gpu>:<mig>} (its parent's NVML index and its position
 * among the parent's MIG devices), the name {@code nvidia-ctk cdi generate} gives it; and {@code all}. Each device
 * carries its own nodes (from gpu-core's {@link GpuDeviceNodes}); the spec-wide edits carry the vendor's control
 * nodes ({@code nvidiactl}, {@code nvidia-uvm} and {@code nvidia-uvm-tools} always: by path alone while the module is
 * not loaded, {@code nvidia-modeset} where present; {@code kfd}), read-only library mounts, and for NVIDIA
 * {@code CUDA_DEVICE_ORDER=PCI_BUS_ID}. {@code cdiVersion} is the lowest the fields need (0.5.0: names that start with
 * a digit and {@code hostPath}), no {@code annotations}: podman 4.3 ignores a whole spec of 0.6.0 or newer.
 * <p>
 * No device sets {@code CUDA_VISIBLE_DEVICES}, {@code NVIDIA_VISIBLE_DEVICES} or {@code ROCR_VISIBLE_DEVICES}: env
 * of several requested devices does not combine (podman 4.3 applies each device's env in turn, the last one wins, even
 * over {@code -e}), so a per-device selector would show a two-GPU container one GPU. The container sees exactly its
 * device nodes, which is the selection; {@link ContainerDevices} gives the selector env for a whole allocation.
 */
public final class CdiSpec {
    /** Valid CDI device names. */
    static final Pattern NAME = Pattern.compile("[A-Za-z0-9][A-Za-z0-9_.:-]*");

    private final String kind;
    private final GpuVendor vendor;
    private final String backend;
    private final Map<String, Object> body;
    private final List<String> names;
    private final List<String> notes;

    private CdiSpec(String kind, GpuVendor vendor, String backend, Map<String, Object> body, List<String> names,
            List<String> notes) {
        this.kind = kind;
        this.vendor = vendor;
        // named in a YAML comment: a backend name with a newline or an escape must not add a line or reach a terminal
        this.backend = Printable.escape(backend);
        this.body = body;
        this.names = List.copyOf(names);
        this.notes = List.copyOf(notes);
    }

    /** @return one spec per vendor present on the node, NVIDIA first */
    public static List<CdiSpec> of(GpuInventory inventory, CdiOptions options) {
        return of(inventory.backend(), inventory.devices(), options);
    }

    /**
     * @param backend named in the file's header (YAML) and {@link #notes()}
     * @param devices every allocatable device of the node
     * @return one spec per vendor present, NVIDIA first
     * @throws GpuException when the node has no device, or a device has no device node
     */
    public static List<CdiSpec> of(String backend, List<GpuDevice> devices, CdiOptions options) {
        if (devices.isEmpty()) {
            throw new GpuException("the node (" + backend + ") has no GPU: no CDI spec to write");
        }
        List<CdiSpec> out = new ArrayList<>();
        for (GpuVendor v : List.of(GpuVendor.NVIDIA, GpuVendor.AMD)) {
            List<GpuDevice> mine = devices.stream().filter(d -> d.vendor() == v)
                    .sorted(Comparator.comparingInt(GpuDevice::index)).toList();
            if (!mine.isEmpty()) {
                out.add(build(backend, v, mine, devices, options));
            }
        }
        return out;
    }

    private static CdiSpec build(String backend, GpuVendor vendor, List<GpuDevice> mine, List<GpuDevice> host,
            CdiOptions o) {
        GpuDeviceNodes table = new GpuDeviceNodes(o.devRoot(), o.procRoot(), true);
        List<String> notes = new ArrayList<>();
        List<Map<String, Object>> devices = new ArrayList<>();
        List<String> names = new ArrayList<>();
        Set<DeviceNode> control = new LinkedHashSet<>();
        Set<DeviceNode> allNodes = new LinkedHashSet<>();
        Map<String, Integer> migPosition = new LinkedHashMap<>();
        boolean hostPath = false;
        for (GpuDevice d : mine) {
            DevicePlan plan = table.plan("GPU " + d.index(), List.of(d), host);
            for (String n : plan.notes()) {
                if (!notes.contains(n)) {
                    notes.add(n);
                }
            }
            control.addAll(plan.controlNodes());
            List<Map<String, Object>> nodes = new ArrayList<>();
            for (DeviceNode n : plan.gpuNodes()) {
                nodes.add(node(n, o.devRoot()));
                hostPath |= nodes.get(nodes.size() - 1).containsKey("hostPath");
                allNodes.add(n);
            }
            Map<String, Object> edits = new LinkedHashMap<>();
            edits.put("deviceNodes", nodes);
            List<String> deviceNames = new ArrayList<>(List.of(String.valueOf(d.index()), d.uuid()));
            if (d.isPartition() && vendor == GpuVendor.NVIDIA) {
                String parent = d.properties().getOrDefault("nvml.index", d.properties().get("nvidia_smi.index"));
                if (parent != null) {
                    int pos = migPosition.merge(parent, 1, Integer::sum) - 1;
                    String n = d.properties().getOrDefault("mig.device_index", String.valueOf(pos));
                    deviceNames.add(parent + ":" + n);
                }
            }
            for (String name : deviceNames) {
                if (!NAME.matcher(name).matches()) {
                    notes.add("device name \"" + name + "\" of GPU " + d.index() + " is not a valid CDI name"
                            + " (letters, digits, _ . : -): left out; use " + kindName(o.kind(vendor),
                                    String.valueOf(d.index())));
                    continue;
                }
                if (names.contains(name)) {
                    throw new GpuException("two devices would both be CDI device " + name + " (GPU " + d.index()
                            + "); gpusched indices and UUIDs must be unique");
                }
                names.add(name);
                Map<String, Object> dev = new LinkedHashMap<>();
                dev.put("name", name);
                dev.put("containerEdits", edits);
                devices.add(dev);
            }
        }
        Map<String, Object> all = new LinkedHashMap<>();
        all.put("name", "all");
        Map<String, Object> allEdits = new LinkedHashMap<>();
        allEdits.put("deviceNodes", allNodes.stream().map(n -> node(n, o.devRoot())).toList());
        all.put("containerEdits", allEdits);
        devices.add(all);
        names.add("all");
        Map<String, Object> common = new LinkedHashMap<>();
        if (vendor == GpuVendor.NVIDIA) {
            common.put("env", List.of("CUDA_DEVICE_ORDER=PCI_BUS_ID"));
        }
        common.put("deviceNodes", control.stream().map(n -> node(n, o.devRoot())).toList());
        boolean mounts = !o.libraryMounts().isEmpty();
        if (mounts) {
            List<Map<String, Object>> m = new ArrayList<>();
            for (Path p : o.libraryMounts()) {
                Map<String, Object> mount = new LinkedHashMap<>();
                mount.put("hostPath", p.toString());
                mount.put("containerPath", p.toString());
                mount.put("options", List.of("ro", "nosuid", "nodev", "bind"));
                m.add(mount);
            }
            common.put("mounts", m);
        }
        hostPath |= control.stream().anyMatch(n -> !containerPath(n, o.devRoot()).equals(n.path().toString()));
        Map<String, Object> body = new LinkedHashMap<>();
        body.put("cdiVersion", minimumVersion(names, hostPath));
        body.put("kind", o.kind(vendor));
        body.put("devices", devices);
        body.put("containerEdits", common);
        return new CdiSpec(o.kind(vendor), vendor, backend, body, names, notes);
    }

    /**
     * The lowest cdiVersion the fields need (as nvidia-ctk sets it): 0.3.0, 0.5.0 for a device name starting with a
     * digit or a device node {@code hostPath}. Fields of 0.6.0 and later (annotations, a dotted class) are never
     * written: podman 4.3 ignores such specs.
     */
    static String minimumVersion(List<String> names, boolean hostPath) {
        boolean digit = names.stream().anyMatch(n -> Character.isDigit(n.charAt(0)));
        return digit || hostPath ? "0.5.0" : "0.3.0";
    }

    static String containerPath(DeviceNode n, Path devRoot) {
        Path p = n.path();
        return p.startsWith(devRoot) ? "/dev/" + devRoot.relativize(p) : p.toString();
    }

    /**
     * A CDI device node: path (and hostPath where it differs), then {@code type}, {@code major} and {@code minor} when
     * the number is known. A node planned by path alone ({@code nvidia-uvm} before its module is loaded) has neither
     * type nor numbers: the runtime reads them from the host's node when it starts the container (CDI's rule for a
     * node with no type or major), and refuses to start one when the host has no such node. A minor without its major
     * would be read as major 0.
     */
    private static Map<String, Object> node(DeviceNode n, Path devRoot) {
        Map<String, Object> m = new LinkedHashMap<>();
        String inside = containerPath(n, devRoot);
        m.put("path", inside);
        if (!inside.equals(n.path().toString())) {
            m.put("hostPath", n.path().toString());
        }
        if (n.numbered()) {
            m.put("type", "c");
            m.put("major", n.major());
            m.put("minor", n.minor());
        }
        m.put("permissions", "rw");
        return m;
    }

    static String kindName(String kind, String name) {
        return kind + "=" + name;
    }

    /** @return the kind, e.g. {@code nvidia.com/gpu} */
    public String kind() {
        return kind;
    }

    /** @return the vendor whose devices the spec holds */
    public GpuVendor vendor() {
        return vendor;
    }

    /** @return the spec's cdiVersion */
    public String cdiVersion() {
        return (String) body.get("cdiVersion");
    }

    /** @return the device names, in file order ({@code 0}, {@code GPU-…}, …, {@code all}) */
    public List<String> deviceNames() {
        return names;
    }

    /** @return optional nodes skipped and names left out, and why */
    public List<String> notes() {
        return notes;
    }

    /** @return the spec as JSON (no comments: JSON has none; the file name says gpusched) */
    public String toJson() {
        return Json.pretty(body) + "\n";
    }

    /** @return the spec as YAML, with a header comment naming the generator and backend */
    public String toYaml() {
        DumperOptions d = new DumperOptions();
        d.setDefaultFlowStyle(DumperOptions.FlowStyle.BLOCK);
        d.setIndent(2);
        d.setWidth(4096);
        return "# CDI spec generated by gpusched (gpu-cdi) from backend " + backend + "; regenerate with: gpusched"
                + " export cdi --write DIR\n" + new Yaml(d).dump(plainCopy(body));
    }

    /** A copy with no shared objects, so that YAML has no anchors and aliases (not every CDI reader takes them). */
    @SuppressWarnings("unchecked")
    private static Object plainCopy(Object o) {
        if (o instanceof Map<?, ?> m) {
            Map<String, Object> c = new LinkedHashMap<>();
            m.forEach((k, v) -> c.put((String) k, plainCopy(v)));
            return c;
        }
        if (o instanceof List<?> l) {
            return new ArrayList<>(l.stream().map(CdiSpec::plainCopy).toList());
        }
        return o;
    }

    /** @return {@code toJson()} or {@code toYaml()} */
    public String render(String format) {
        return switch (format) {
            case "json" -> toJson();
            case "yaml" -> toYaml();
            default -> throw new GpuException("CDI format \"" + format + "\" is not json or yaml");
        };
    }

    /**
     * @return the file name: {@code gpusched-nvidia.json} or {@code .yaml} (never {@code .yml}: podman 4.3 ignores
     *         it)
     */
    public String fileName(String format) {
        render(format.equals("json") ? "json" : format.equals("yaml") ? "yaml" : format); // validates
        return "gpusched-" + vendor.name().toLowerCase(Locale.ROOT) + "." + format;
    }

    /**
     * Writes the spec into a CDI directory ({@code /etc/cdi} or {@code /var/run/cdi}) atomically.
     *
     * @return the file
     * @throws GpuException when the directory is writable by others, or the write fails
     */
    public Path writeTo(Path dir, String format) {
        return ConfigFiles.writeAtomically(dir, fileName(format), render(format).getBytes(StandardCharsets.UTF_8));
    }
}
