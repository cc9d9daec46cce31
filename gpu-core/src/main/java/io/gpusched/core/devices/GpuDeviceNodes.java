package io.gpusched.core.devices;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuException;
import io.gpusched.core.GpuVendor;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.Set;

/**
 * The vendor device-node table: which {@code /dev} nodes a set of GPUs needs and which the host's other GPUs have, the
 * one place gpusched knows it (isolation fences with it; YARN, CDI, Kubernetes and Slurm name devices with it).
 * NVIDIA: {@code /dev/nvidiaN} is 195:N where N is the device minor (not the NVML index),
 * {@code /dev/nvidiactl} 195:255, {@code /dev/nvidia-uvm} and {@code /dev/nvidia-uvm-tools} (minors 0 and 1 of the
 * {@code nvidia-uvm} major) always, as every CUDA program needs them: with their major when the module is loaded, by
 * path alone when it is not yet ({@link DeviceNode#byPath}: containers get them, the runtime reads their numbers when
 * the container starts), {@code /dev/nvidia-modeset} 195:254 when asked and present, and for MIG devices the GPU- and
 * compute-instance access caps under {@code /dev/nvidia-caps} (major {@code nvidia-caps}, minors from
 * {@code /proc/driver/nvidia-caps/mig-minors}). AMD: {@code /dev/kfd} (major {@code kfd}; by path when unknown) and
 * {@code /dev/dri/renderD<minor>} and {@code /dev/dri/card<N>} (226). What is skipped or planned by path is said in the
 * plan's notes.
 * <p>
 * Majors come from {@code /proc/devices}, read at every plan (a module loaded since the last one counts), unless the
 * node describes its own: a device with the property {@value #CHAR_MAJORS_PROPERTY} (every device of a simulated node
 * built from a node description has it, {@link CharMajors#format()}'s form, empty for none) gives the node's majors,
 * and {@code /proc/devices} is then not read at all, so a simulated node plans the same on every machine. Such a node's
 * MIG access-cap minors are likewise its own: the driver's {@code mig-minors} table follows a fixed formula
 * ({@link #migCapMinor}), computed for the node's GPUs rather than read from this host's {@code /proc}.
 */
public final class GpuDeviceNodes {
    /** Major of {@code /dev/nvidia*} GPU and control nodes. */
    public static final int NVIDIA_MAJOR = 195;
    /** Minor of {@code /dev/nvidiactl}. */
    public static final int NVIDIACTL_MINOR = 255;
    /** Minor of {@code /dev/nvidia-modeset}. */
    public static final int MODESET_MINOR = 254;
    /** MIG GPU instances per GPU in the driver's {@code mig-minors} table. */
    static final int MIG_GPU_INSTANCES = 15;
    /** MIG compute instances per GPU instance in the driver's {@code mig-minors} table. */
    static final int MIG_COMPUTE_INSTANCES = 8;
    /** GPUs in the driver's {@code mig-minors} table. */
    static final int MIG_GPUS = 32;
    /** Major of DRM nodes. */
    public static final int DRM_MAJOR = 226;
    /** The device property by which a node describes its own character majors ({@link CharMajors#format()}). */
    public static final String CHAR_MAJORS_PROPERTY = "char_majors";

    private final Path devRoot;
    private final Path procRoot;
    private final boolean modeset;

    /**
     * @param devRoot  root of the device nodes ({@code /dev})
     * @param procRoot root of procfs ({@code /proc}), for dynamic majors and MIG cap minors
     * @param modeset  whether jobs also get {@code /dev/nvidia-modeset}
     */
    public GpuDeviceNodes(Path devRoot, Path procRoot, boolean modeset) {
        this.devRoot = devRoot;
        this.procRoot = procRoot;
        this.modeset = modeset;
    }

    /** @return majors by driver name from {@code /proc/devices} (character devices), read now */
    public Map<String, Integer> charMajors() {
        return CharMajors.read(procRoot).asMap();
    }

    /**
     * The majors of the node these devices belong to: those the devices describe ({@value #CHAR_MAJORS_PROPERTY}),
     * else {@code /proc/devices} read now.
     *
     * @param devices devices of one node (a set and the host's devices)
     * @return the majors and where they came from
     * @throws GpuException when devices describe different majors, or a description is not valid
     */
    Described majorsOf(List<GpuDevice> devices) {
        String described = null;
        GpuDevice by = null;
        for (GpuDevice d : devices) {
            String v = d.properties().get(CHAR_MAJORS_PROPERTY);
            if (v == null) {
                continue;
            }
            if (described != null && !described.equals(v)) {
                throw new GpuException("GPU " + by.index() + " and GPU " + d.index() + " describe different character"
                        + " majors (" + CHAR_MAJORS_PROPERTY + " \"" + described + "\" and \"" + v + "\"); the devices"
                        + " of one node must describe the same");
            }
            described = v;
            by = d;
        }
        if (described == null) {
            return new Described(CharMajors.read(procRoot), procRoot.resolve("devices").toString(), false);
        }
        try {
            return new Described(CharMajors.parse(described), "the node's own description (" + CHAR_MAJORS_PROPERTY
                    + " of GPU " + by.index() + ")", true);
        } catch (IllegalArgumentException e) {
            throw new GpuException("GPU " + by.index() + " (" + by.uuid() + "): " + e.getMessage(), e);
        }
    }

    /** Majors, where they were read, and whether the node described them itself (then nothing of the host is read). */
    record Described(CharMajors majors, String source, boolean own) {
    }

    /**
     * The minor the NVIDIA driver gives a MIG access cap in {@code /proc/driver/nvidia-caps/mig-minors}: the table is
     * {@code config 1}, {@code monitor 2}, then for each GPU {@code g} (0-31), each GPU instance {@code i} (0-14) its
     * {@code gpu<g>/gi<i>/access} followed by its 8 {@code gpu<g>/gi<i>/ci<c>/access}: {@code 3 + 135g + 9i} and
     * {@code 4 + 135g + 9i + c}.
     *
     * @param gpu the GPU's NVML index
     * @param gi  the GPU instance id
     * @param ci  the compute instance id, or -1 for the GPU instance's own cap
     * @return the cap minor
     * @throws IllegalArgumentException when an id is outside the driver's table
     */
    /**
     * Checks a MIG device's ids as a node description gives them (device properties {@code nvml.index},
     * {@code mig.gpu_instance_id}, {@code mig.compute_instance_id}; the last may be absent): plain decimals as the
     * driver writes them, inside the driver's {@code mig-minors} table.
     *
     * @return the key {@code gpu<g>/gi<i>[/ci<c>]} that names the device's access caps
     * @throws IllegalArgumentException naming the id and what would be valid
     */
    public static String checkMigIds(String gpu, String gi, String ci) {
        int g = migId("nvml.index", gpu, MIG_GPUS);
        int i = migId("mig.gpu_instance_id", gi, MIG_GPU_INSTANCES);
        int c = ci == null ? -1 : migId("mig.compute_instance_id", ci, MIG_COMPUTE_INSTANCES);
        return "gpu" + g + "/gi" + i + (c < 0 ? "" : "/ci" + c);
    }

    private static int migId(String name, String v, int bound) {
        if (v == null || !v.matches("0|[1-9][0-9]?") || Integer.parseInt(v) >= bound) {
            throw new IllegalArgumentException(name + " " + (v == null ? "is missing" : "\"" + v + "\" is not one")
                    + ": the driver's MIG table holds " + name + " 0 to " + (bound - 1) + ", written as plain"
                    + " decimals without leading zeros");
        }
        return Integer.parseInt(v);
    }

    static int migCapMinor(int gpu, int gi, int ci) {
        if (gpu < 0 || gpu >= MIG_GPUS || gi < 0 || gi >= MIG_GPU_INSTANCES || ci < -1
                || ci >= MIG_COMPUTE_INSTANCES) {
            throw new IllegalArgumentException("MIG ids gpu " + gpu + ", gi " + gi + ", ci " + ci + " are outside the"
                    + " driver's table (gpu 0-" + (MIG_GPUS - 1) + ", gi 0-" + (MIG_GPU_INSTANCES - 1) + ", ci 0-"
                    + (MIG_COMPUTE_INSTANCES - 1) + ")");
        }
        return 3 + gpu * MIG_GPU_INSTANCES * (MIG_COMPUTE_INSTANCES + 1) + gi * (MIG_COMPUTE_INSTANCES + 1) + 1 + ci;
    }

    /**
     * The {@code mig-minors} entries of a node that describes itself: the driver's table ({@link #migCapMinor}) for
     * each GPU (by {@code nvml.index}) that has MIG partitions on the node.
     */
    static Map<String, Integer> describedMigMinors(List<GpuDevice> devices) {
        Map<String, Integer> out = new HashMap<>();
        Set<Integer> gpus = new LinkedHashSet<>();
        for (GpuDevice d : devices) {
            String g = d.properties().get("nvml.index");
            if (d.isPartition() && g != null && g.matches("[0-9]{1,2}") && Integer.parseInt(g) < MIG_GPUS) {
                gpus.add(Integer.parseInt(g));
            }
        }
        for (int g : gpus) {
            for (int i = 0; i < MIG_GPU_INSTANCES; i++) {
                out.put("gpu" + g + "/gi" + i + "/access", migCapMinor(g, i, -1));
                for (int c = 0; c < MIG_COMPUTE_INSTANCES; c++) {
                    out.put("gpu" + g + "/gi" + i + "/ci" + c + "/access", migCapMinor(g, i, c));
                }
            }
        }
        return out;
    }

    /** @return mig-minors entries such as {@code gpu0/gi1/access -> 12} */
    Map<String, Integer> migMinors() {
        Map<String, Integer> out = new HashMap<>();
        Path file = procRoot.resolve("driver/nvidia-caps/mig-minors");
        if (!Files.isRegularFile(file)) { // a FIFO or device there would block every plan in open(2)
            return out;
        }
        try {
            for (String line : Files.readAllLines(file)) {
                String[] f = line.trim().split("\\s+");
                // a device minor is 20 bits (MINORMASK): a longer number is not one, and is skipped
                if (f.length == 2 && f[1].matches("[0-9]{1,7}") && Integer.parseInt(f[1]) <= 0xFFFFF) {
                    out.put(f[0], Integer.parseInt(f[1]));
                }
            }
        } catch (IOException e) {
            return out;
        }
        return out;
    }

    /**
     * Plans the nodes of an allocation against every GPU of the host.
     *
     * @param allocation the job's devices
     * @param host       every allocatable device of the host (the inventory's {@code devices()})
     * @throws GpuException when a device has no minor, or vendors are mixed
     */
    public DevicePlan plan(Allocation allocation, List<GpuDevice> host) {
        return plan("allocation " + allocation.id(), allocation.devices(), host);
    }

    /**
     * Plans the nodes of a set of devices against every GPU of the host.
     *
     * @param what    names the set in errors ({@code "allocation P-3"}, {@code "GPU 2"})
     * @param devices the set (one vendor)
     * @param host    every allocatable device of the host
     * @return the plan
     * @throws GpuException when a device has no minor, the set is empty, or vendors are mixed
     */
    public DevicePlan plan(String what, List<GpuDevice> devices, List<GpuDevice> host) {
        List<GpuVendor> vendors = devices.stream().map(GpuDevice::vendor).distinct().toList();
        if (vendors.size() != 1) {
            throw new GpuException(what + " has devices of vendors " + vendors + "; a device plan serves one vendor");
        }
        List<GpuDevice> all = new ArrayList<>(devices);
        all.addAll(host);
        Described majors = majorsOf(all);
        return vendors.get(0) == GpuVendor.NVIDIA ? nvidia(devices, host, majors) : amd(devices, host, majors);
    }

    private static int minorOf(GpuDevice d) {
        OptionalInt m = d.minor();
        if (m.isEmpty()) {
            throw new GpuException("GPU " + d.index() + " (" + d.uuid() + ") has no device minor; its backend"
                    + " does not report which /dev node it is, so it cannot be fenced");
        }
        return m.getAsInt();
    }

    private DevicePlan nvidia(List<GpuDevice> set, List<GpuDevice> host, Described described) {
        List<DeviceNode> allowed = new ArrayList<>();
        List<DeviceNode> denied = new ArrayList<>();
        List<String> notes = new ArrayList<>();
        Set<Integer> mine = new LinkedHashSet<>();
        for (GpuDevice d : set) {
            mine.add(minorOf(d));
        }
        for (int m : mine) {
            allowed.add(new DeviceNode(devRoot.resolve("nvidia" + m), NVIDIA_MAJOR, m, "gpu"));
        }
        allowed.add(new DeviceNode(devRoot.resolve("nvidiactl"), NVIDIA_MAJOR, NVIDIACTL_MINOR, "control"));
        CharMajors majors = described.majors();
        OptionalInt uvm = majors.major("nvidia-uvm");
        Path uvmNode = devRoot.resolve("nvidia-uvm");
        Path uvmTools = devRoot.resolve("nvidia-uvm-tools");
        if (uvm.isEmpty()) {
            notes.add("nvidia-uvm is not in " + described.source() + " (module not loaded): " + uvmNode + " and "
                    + uvmTools + " are planned by path only; a container runtime reads their numbers when it starts"
                    + " the container, and a cgroup fence cannot allow them until the module is loaded"
                    + " (nvidia-modprobe -u -c=0 loads it and makes the nodes)");
            allowed.add(DeviceNode.byPath(uvmNode, 0, "uvm"));
            allowed.add(DeviceNode.byPath(uvmTools, 1, "uvm"));
        } else {
            allowed.add(new DeviceNode(uvmNode, uvm.getAsInt(), 0, "uvm"));
            allowed.add(new DeviceNode(uvmTools, uvm.getAsInt(), 1, "uvm"));
        }
        if (modeset) {
            optional(allowed, notes, devRoot.resolve("nvidia-modeset"), NVIDIA_MAJOR, MODESET_MINOR, "modeset");
        }
        Set<Integer> others = new LinkedHashSet<>();
        for (GpuDevice d : host) {
            if (d.vendor() == GpuVendor.NVIDIA && d.minor().isPresent() && !mine.contains(d.minor().getAsInt())) {
                others.add(d.minor().getAsInt());
            }
        }
        for (int m : others) {
            denied.add(new DeviceNode(devRoot.resolve("nvidia" + m), NVIDIA_MAJOR, m, "gpu"));
        }
        List<Integer> vendorMajors = new ArrayList<>(List.of(NVIDIA_MAJOR));
        List<GpuDevice> migs = set.stream().filter(GpuDevice::isPartition).toList();
        OptionalInt capsNumber = majors.major("nvidia-caps");
        if (!migs.isEmpty() || host.stream().anyMatch(GpuDevice::isPartition)) {
            List<GpuDevice> all = new ArrayList<>(set);
            all.addAll(host);
            Map<String, Integer> caps = described.own() ? describedMigMinors(all) : migMinors();
            if (capsNumber.isEmpty() || caps.isEmpty()) {
                notes.add("MIG access caps skipped: nvidia-caps is not in " + described.source() + " or "
                        + (described.own() ? "no MIG device of the node has an nvml.index"
                                : procRoot.resolve("driver/nvidia-caps/mig-minors") + " is absent"));
            } else {
                int capsMajor = capsNumber.getAsInt();
                Set<Integer> myCaps = new LinkedHashSet<>();
                for (GpuDevice d : migs) {
                    Optional<String> gpu = Optional.ofNullable(d.properties().get("nvml.index"));
                    Optional<String> gi = Optional.ofNullable(d.properties().get("mig.gpu_instance_id"));
                    Optional<String> ci = Optional.ofNullable(d.properties().get("mig.compute_instance_id"));
                    if (gpu.isEmpty() || gi.isEmpty() || ci.isEmpty()) {
                        notes.add("MIG device " + d.uuid()
                                + " lacks nvml.index/gpu/compute instance ids: caps skipped");
                        continue;
                    }
                    String base = "gpu" + gpu.get() + "/gi" + gi.get();
                    for (String key : List.of(base + "/access", base + "/ci" + ci.get() + "/access")) {
                        Integer minor = caps.get(key);
                        if (minor == null) {
                            notes.add("no mig-minors entry for " + key);
                        } else {
                            myCaps.add(minor);
                        }
                    }
                }
                for (int m : myCaps) {
                    allowed.add(new DeviceNode(devRoot.resolve("nvidia-caps/nvidia-cap" + m), capsMajor, m, "mig-cap"));
                }
                for (Map.Entry<String, Integer> e : caps.entrySet()) {
                    if (e.getKey().contains("/gi") && !myCaps.contains(e.getValue())) {
                        denied.add(new DeviceNode(devRoot.resolve("nvidia-caps/nvidia-cap" + e.getValue()), capsMajor,
                                e.getValue(), "mig-cap"));
                    }
                }
                vendorMajors.add(capsMajor);
            }
        }
        denied.sort((x, y) -> x.major() != y.major() ? Integer.compare(x.major(), y.major())
                : Integer.compare(x.minor(), y.minor()));
        return new DevicePlan(allowed, denied, vendorMajors, notes);
    }

    private DevicePlan amd(List<GpuDevice> set, List<GpuDevice> host, Described described) {
        List<DeviceNode> allowed = new ArrayList<>();
        List<DeviceNode> denied = new ArrayList<>();
        List<String> notes = new ArrayList<>();
        Set<Integer> mine = new LinkedHashSet<>();
        for (GpuDevice d : set) {
            mine.add(minorOf(d));
        }
        for (GpuDevice d : set) {
            int m = minorOf(d);
            if (allowed.stream().noneMatch(n -> n.minor() == m && n.role().equals("render"))) {
                allowed.add(new DeviceNode(devRoot.resolve("dri/renderD" + m), DRM_MAJOR, m, "render"));
                cardOf(d, m, notes).ifPresent(c -> allowed.add(new DeviceNode(devRoot.resolve("dri/card" + c),
                        DRM_MAJOR, c, "card")));
            }
        }
        OptionalInt kfd = described.majors().major("kfd");
        if (kfd.isEmpty()) {
            notes.add("kfd is not in " + described.source() + " (amdgpu not loaded): " + devRoot.resolve("kfd")
                    + " is planned by path only; a container runtime reads its number when it starts the container,"
                    + " and a cgroup fence cannot allow it until the module is loaded");
            allowed.add(DeviceNode.byPath(devRoot.resolve("kfd"), 0, "kfd"));
        } else {
            allowed.add(new DeviceNode(devRoot.resolve("kfd"), kfd.getAsInt(), 0, "kfd"));
        }
        Set<Integer> myCards = new LinkedHashSet<>();
        allowed.stream().filter(n -> n.role().equals("card")).forEach(n -> myCards.add(n.minor()));
        Set<Integer> seen = new LinkedHashSet<>();
        for (GpuDevice d : host) {
            if (d.vendor() == GpuVendor.AMD && d.minor().isPresent() && !mine.contains(d.minor().getAsInt())
                    && seen.add(d.minor().getAsInt())) {
                int m = d.minor().getAsInt();
                denied.add(new DeviceNode(devRoot.resolve("dri/renderD" + m), DRM_MAJOR, m, "render"));
                Optional<Integer> card = cardOf(d, m, notes);
                if (card.isPresent() && !myCards.contains(card.get())) {
                    denied.add(new DeviceNode(devRoot.resolve("dri/card" + card.get()), DRM_MAJOR, card.get(), "card"));
                }
            }
        }
        return new DevicePlan(allowed, denied, List.of(DRM_MAJOR), notes);
    }

    /**
     * The DRM primary ({@code /dev/dri/cardN}) minor of an AMD GPU: the {@code drm.card_minor} property when the
     * backend gives it, else udev's {@code dri/by-path/pci-<bus>-card} link, else render minor - 128 (the kernel's
     * numbering for the first 64 cards), said in a note.
     */
    Optional<Integer> cardOf(GpuDevice d, int renderMinor, List<String> notes) {
        String prop = d.properties().get("drm.card_minor");
        if (prop != null && prop.matches("[0-9]{1,7}")) {
            return Optional.of(Integer.parseInt(prop));
        }
        if (d.pciBusId() != null && !d.pciBusId().isBlank()) {
            Path link = devRoot.resolve("dri/by-path/pci-" + d.pciBusId().toLowerCase(Locale.ROOT) + "-card");
            try {
                String target = Files.readSymbolicLink(link).getFileName().toString();
                if (target.matches("card[0-9]{1,7}")) {
                    return Optional.of(Integer.parseInt(target.substring(4)));
                }
            } catch (IOException | UnsupportedOperationException e) {
                // no udev link: fall through
            }
        }
        if (renderMinor >= 128 && renderMinor < 192) {
            String note = "card minor of renderD" + renderMinor + " taken as " + (renderMinor - 128)
                    + " (render minor - 128): no drm.card_minor property and no dri/by-path link";
            if (!notes.contains(note)) {
                notes.add(note);
            }
            return Optional.of(renderMinor - 128);
        }
        notes.add("no card node known for renderD" + renderMinor + ": its /dev/dri/card node is not planned");
        return Optional.empty();
    }

    private static void optional(List<DeviceNode> into, List<String> notes, Path p, int major, int minor, String role) {
        if (Files.exists(p)) {
            into.add(new DeviceNode(p, major, minor, role));
        } else {
            notes.add(p + " does not exist: skipped");
        }
    }
}
