package io.gpusched.slurm;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuException;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.devices.DeviceNode;
import io.gpusched.core.devices.DevicePlan;
import io.gpusched.core.devices.GpuDeviceNodes;
import io.gpusched.core.internal.Printable;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.Set;
import java.util.SortedSet;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A node's Slurm GPU GRES as gpusched sees it: the {@code gres.conf} lines, the {@code Gres=} of the node's
 * {@code slurm.conf} line, and a check of an existing {@code gres.conf} against them.
 * <p>
 * Records are written in PCI bus order (the order Slurm's own detection numbers GPUs in), one device per line:
 * {@code Type=} a short model ({@code v100}, {@code h100}, {@code mi210}; MIG devices {@code <model>_<profile>}),
 * {@code File=} the device node from gpu-core's {@link GpuDeviceNodes} ({@code /dev/nvidiaN}; AMD the render node
 * {@code /dev/dri/renderD<minor>}; MIG {@code MultipleFiles=} the parent GPU's node and its GPU- and compute-instance
 * caps), {@code Cores=} the cores of the GPU's NUMA node in Slurm's abstract numbering (see {@link CpuLayout}),
 * {@code Links=} NVLink/XGMI counts in record order (-1 for itself), and {@code Flags=nvidia_gpu_env} or
 * {@code amd_gpu_env}. Unhealthy and lost GPUs, and devices without a device node, are left out with a comment naming
 * why. The same node gives the same bytes.
 */
public final class SlurmGres {
    /** The {@code slurm.conf} line the node's GRES need. */
    public static final String GRES_TYPES = "GresTypes=gpu";
    private static final Pattern MIG_PROFILE = Pattern.compile("\\bMIG\\s+([0-9]+g\\.[0-9]+gb(?:\\+[a-z0-9.]+)?)",
            Pattern.CASE_INSENSITIVE);
    private static final Pattern MODEL = Pattern.compile("[a-z]{1,3}[0-9]{1,4}[a-z]{0,2}");
    private static final Set<String> NOT_MODELS = Set.of("nvidia", "tesla", "amd", "instinct", "radeon", "geforce",
            "quadro", "pro", "sxm", "sxm2", "sxm3", "sxm4", "sxm5", "sxm6", "pcie", "nvl", "hbm", "hbm2", "hbm2e",
            "hbm3", "hbm3e", "mig", "oam");

    /**
     * Where the generator looks.
     *
     * @param devRoot  where device nodes live ({@code /dev}); {@code File=} names paths under it
     * @param procRoot procfs root, for dynamic majors and MIG cap minors ({@code /proc})
     * @param cpus     the host's cores per NUMA node, for {@code Cores=}; {@link CpuLayout#unknown()} writes none
     */
    public record Options(Path devRoot, Path procRoot, CpuLayout cpus) {
        /** @throws NullPointerException for a missing field */
        public Options {
            Objects.requireNonNull(devRoot, "devRoot");
            Objects.requireNonNull(procRoot, "procRoot");
            Objects.requireNonNull(cpus, "cpus");
        }

        /** @return {@code /dev}, {@code /proc} and the CPU layout of {@code /sys} */
        public static Options host() {
            return new Options(Path.of("/dev"), Path.of("/proc"), CpuLayout.fromSysfs(Path.of("/sys")));
        }
    }

    private record Entry(GpuDevice device, GresRecord record) {
    }

    private final String backend;
    private final List<Entry> entries;
    private final List<String> comments;
    private final Map<String, String> leftOutFiles;

    private SlurmGres(String backend, List<Entry> entries, List<String> comments, Map<String, String> leftOutFiles) {
        // named in a comment line: a backend name with a newline must not add a line slurmd would read
        this.backend = Printable.escape(backend);
        this.entries = List.copyOf(entries);
        this.comments = comments.stream().map(Printable::escape).toList(); // UUIDs, reasons: one line each
        this.leftOutFiles = Map.copyOf(leftOutFiles);
    }

    /** @return the GRES of an inventory's devices (health as the inventory reports it) */
    public static SlurmGres of(GpuInventory inventory, Options options) {
        return of(inventory.backend(), inventory.devices(), inventory.topology(), inventory::health, options);
    }

    /**
     * @param backend  named in the header ({@code nvml}, {@code simulated:dgx1-v100})
     * @param devices  every allocatable device of the node
     * @param topology their links
     * @param health   each device's health; devices not {@code HEALTHY} are left out
     * @return the GRES
     */
    public static SlurmGres of(String backend, List<GpuDevice> devices, GpuTopology topology,
            Function<GpuDevice, GpuHealth> health, Options options) {
        GpuDeviceNodes table = new GpuDeviceNodes(options.devRoot(), options.procRoot(), false);
        List<GpuDevice> sorted = new ArrayList<>(devices);
        sorted.sort(Comparator.comparing((GpuDevice d) -> d.pciBusId().toLowerCase(Locale.ROOT))
                .thenComparingInt(GpuDevice::index));
        List<String> comments = new ArrayList<>();
        Map<String, String> leftOut = new LinkedHashMap<>();
        List<GpuDevice> kept = new ArrayList<>();
        List<List<String>> files = new ArrayList<>();
        for (GpuDevice d : sorted) {
            GpuHealth h = health.apply(d);
            List<String> f;
            try {
                f = files(table, d, devices);
            } catch (GpuException e) {
                comments.add("GPU " + d.index() + " (" + d.uuid() + ") left out: " + e.getMessage());
                continue;
            }
            if (h.state() != GpuHealth.State.HEALTHY) {
                String why = h.state().name().toLowerCase(Locale.ROOT) + ": " + h.reason().orElse("no reason given");
                comments.add("GPU " + d.index() + " (" + d.uuid() + ", " + String.join(",", f) + ") left out: " + why);
                f.forEach(x -> leftOut.put(x, "GPU " + d.index() + " is " + why));
                continue;
            }
            kept.add(d);
            files.add(f);
        }
        boolean anyMultiple = kept.stream().anyMatch(GpuDevice::isPartition)
                && files.stream().anyMatch(f -> f.size() > 1);
        // Cores: all records or none (Slurm rejects "CPUs configured for only some of the records")
        boolean cores = options.cpus().coreCount() > 0;
        if (!cores && !kept.isEmpty()) {
            comments.add("Cores= left out: the host's CPU layout is unknown");
        }
        for (GpuDevice d : kept) {
            if (cores && (d.numaNode().isEmpty() || options.cpus().cores(d.numaNode().getAsInt()).isEmpty())) {
                comments.add("Cores= left out on every line: GPU " + d.index() + (d.numaNode().isEmpty()
                        ? " has no NUMA node" : " is on NUMA node " + d.numaNode().getAsInt() + ", which this host's"
                                + " CPU layout (" + options.cpus().describe() + ") does not have"));
                cores = false;
            }
        }
        boolean links = !anyMultiple && kept.size() > 1;
        boolean anyLink = false;
        if (links) {
            for (int i = 0; i < kept.size(); i++) {
                for (int j = i + 1; j < kept.size(); j++) {
                    anyLink |= linkCount(topology, kept.get(i), kept.get(j)) > 0;
                }
            }
        }
        links &= anyLink;
        List<Entry> entries = new ArrayList<>();
        for (int i = 0; i < kept.size(); i++) {
            GpuDevice d = kept.get(i);
            Optional<SortedSet<Integer>> c = cores ? options.cpus().cores(d.numaNode().getAsInt()) : Optional.empty();
            Optional<List<Integer>> l = Optional.empty();
            if (links) {
                List<Integer> row = new ArrayList<>();
                for (int j = 0; j < kept.size(); j++) {
                    row.add(i == j ? -1 : linkCount(topology, d, kept.get(j)));
                }
                l = Optional.of(row);
            }
            List<String> f = files.get(i);
            entries.add(new Entry(d, new GresRecord(Optional.of(type(d, devices)), f, f.size() > 1, c, l,
                    List.of(d.vendor() == GpuVendor.AMD ? "amd_gpu_env" : "nvidia_gpu_env"), OptionalLong.empty(),
                    0)));
        }
        return new SlurmGres(backend, entries, comments, leftOut);
    }

    private static int linkCount(GpuTopology t, GpuDevice a, GpuDevice b) {
        try {
            return t.linkCount(a.index(), b.index());
        } catch (IllegalArgumentException e) {
            return 0;
        }
    }

    private static List<String> files(GpuDeviceNodes table, GpuDevice d, List<GpuDevice> host) {
        DevicePlan plan = table.plan("GPU " + d.index(), List.of(d), host);
        List<String> out = new ArrayList<>();
        for (DeviceNode n : plan.gpuNodes()) {
            switch (n.role()) {
                case "gpu", "render" -> out.add(n.path().toString());
                case "mig-cap" -> out.add(n.path().toString());
                default -> {} // DRM card nodes: Slurm names AMD GPUs by their render node, as its rsmi plug-in does
            }
        }
        if (d.isPartition() && d.vendor() == GpuVendor.NVIDIA && out.size() < 3) {
            throw new GpuException("MIG device without its GPU- and compute-instance caps ("
                    + String.join("; ", plan.notes()) + "); Slurm needs MultipleFiles= with the parent GPU and both"
                    + " caps to tell MIG devices apart");
        }
        return out;
    }

    /**
     * The {@code Type=} of a device: the short model, lower case ({@code Tesla V100-SXM2-32GB} is {@code v100},
     * {@code AMD Instinct MI210} is {@code mi210}); when the name has none, the name with spaces as {@code _} (as
     * Slurm's AutoDetect names types); a MIG device adds its profile ({@code h100_3g.40gb}).
     */
    public static String type(GpuDevice d, List<GpuDevice> host) {
        String base = model(d.name());
        if (d.isPartition() && d.vendor() == GpuVendor.NVIDIA) {
            Matcher m = MIG_PROFILE.matcher(d.name());
            return m.find() ? base + "_" + m.group(1).toLowerCase(Locale.ROOT) : base + "_mig";
        }
        return base;
    }

    static String model(String name) {
        String lower = name.toLowerCase(Locale.ROOT);
        int mig = lower.indexOf(" mig");
        String head = mig > 0 ? lower.substring(0, mig) : lower;
        for (String tok : head.split("[\\s_-]+")) {
            if (!NOT_MODELS.contains(tok) && MODEL.matcher(tok).matches() && !tok.matches("[0-9]+gb")) {
                return tok;
            }
        }
        String t = head.strip().replaceAll("\\s+", "_").replaceAll("[^a-z0-9_.-]", "");
        return t.isEmpty() ? "gpu" : t;
    }

    /** @return the records gpusched would write, in file order */
    public List<GresRecord> records() {
        return entries.stream().map(Entry::record).toList();
    }

    /** @return the devices written, in file order */
    public List<GpuDevice> devices() {
        return entries.stream().map(Entry::device).toList();
    }

    /** @return comments on what was left out and why */
    public List<String> notes() {
        return comments;
    }

    /** @return the value of the node's {@code Gres=}, e.g. {@code gpu:v100:8} or {@code gpu:a100:2,gpu:a10:1} */
    public String gresValue() {
        Map<String, Integer> counts = new LinkedHashMap<>();
        for (Entry e : entries) {
            counts.merge(e.record().type().orElseThrow(), 1, Integer::sum);
        }
        List<String> parts = new ArrayList<>();
        counts.forEach((t, n) -> parts.add("gpu:" + t + ":" + n));
        return String.join(",", parts);
    }

    /**
     * @param nodeName the node's name in slurm.conf
     * @return the node's {@code slurm.conf} line, e.g. {@code NodeName=n1 Gres=gpu:v100:8} (other fields are yours)
     * @throws IllegalArgumentException for a name Slurm cannot read as one token (empty, blank, whitespace, {@code =},
     *                                  {@code #}, control characters)
     */
    public String nodeLine(String nodeName) {
        if (nodeName == null || !nodeName.matches("[A-Za-z0-9._\\-\\[\\],]{1,253}")) {
            throw new IllegalArgumentException("node name \"" + nodeName + "\" cannot be written on a slurm.conf line: "
                    + "use 1 to 253 letters, digits, '.', '_', '-' (and a hostlist's [] and ,), no spaces, '=', '#' or"
                    + " line breaks");
        }
        return "NodeName=" + nodeName + (entries.isEmpty() ? "" : " Gres=" + gresValue());
    }

    /** @return the {@code gres.conf} text */
    public String gresConf() {
        StringBuilder b = new StringBuilder();
        b.append("# gres.conf generated by gpusched (gpu-slurm) from backend ").append(backend)
                .append("; regenerate with: gpusched export slurm\n");
        b.append("# slurm.conf needs ").append(GRES_TYPES).append(entries.isEmpty() ? ""
                : " and Gres=" + gresValue() + " on this node's NodeName line").append('\n');
        if (entries.stream().anyMatch(e -> e.record().cores().isPresent())) {
            b.append("# Cores= are Slurm's abstract core indices: one per physical core, socket by socket\n");
        }
        for (String c : comments) {
            b.append("# ").append(c.replaceAll("[\\r\\n\\u000B\\u000C\\u0085\\u2028\\u2029]", " ")).append('\n');
        }
        b.append("AutoDetect=off\n");
        for (Entry e : entries) {
            b.append(e.record().toLine()).append('\n');
        }
        return b.toString();
    }

    /**
     * Compares an existing {@code gres.conf} with the node.
     *
     * @param actual the file's gpu records ({@link GresConfParser#parse})
     * @return one line per drift (missing or extra File, wrong Type, Cores, Links, count); empty when they agree
     */
    public List<String> check(List<GresRecord> actual) {
        return GresCheck.check(this, actual, leftOutFiles);
    }
}
