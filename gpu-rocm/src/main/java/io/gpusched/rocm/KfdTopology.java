package io.gpusched.rocm;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.Set;
import java.util.stream.Stream;

/**
 * Reads a KFD topology ({@code /sys/class/kfd/kfd/topology/nodes/*}): each node's {@code properties} ("key value"
 * lines of unsigned integers), {@code gpu_id}, {@code mem_banks/*} and {@code io_links/*}. Unknown keys are kept,
 * malformed lines are reported in {@link #problems()}, never thrown.
 */
public final class KfdTopology {

    /** io_link type of an XGMI link. */
    public static final long LINK_XGMI = 11;
    /** io_link type of a PCIe link. */
    public static final long LINK_PCIE = 2;

    /**
     * One io_link.
     *
     * @param type   2 PCIe, 11 XGMI
     * @param from   node id
     * @param to     node id
     * @param weight link weight
     */
    public record IoLink(long type, long from, long to, long weight) {
    }

    /**
     * One KFD node.
     *
     * @param id         node id (directory name)
     * @param properties its properties, unsigned values held in longs
     * @param gpuId      content of {@code gpu_id} (0 for CPUs)
     * @param memBank0   {@code size_in_bytes} of {@code mem_banks/0}
     * @param ioLinks    its io_links
     */
    public record Node(int id, Map<String, Long> properties, OptionalLong gpuId, OptionalLong memBank0,
            List<IoLink> ioLinks) {
        /** @return a property, if present */
        public OptionalLong get(String key) {
            Long v = properties.get(key);
            return v == null ? OptionalLong.empty() : OptionalLong.of(v);
        }

        /** @return true for GPU nodes ({@code simd_count} other than 0) */
        public boolean isGpu() {
            return get("simd_count").orElse(0) != 0;
        }
    }

    private final Path root;
    private final List<Node> nodes;
    private final List<String> problems;

    private KfdTopology(Path root, List<Node> nodes, List<String> problems) {
        this.root = root;
        this.nodes = List.copyOf(nodes);
        this.problems = List.copyOf(problems);
    }

    /** @return where the topology was read */
    public Path root() {
        return root;
    }

    /** @return every node, by id */
    public List<Node> nodes() {
        return nodes;
    }

    /** @return GPU nodes only, by id */
    public List<Node> gpuNodes() {
        return nodes.stream().filter(Node::isGpu).toList();
    }

    /** @return malformed lines and unreadable files, one line each */
    public List<String> problems() {
        return problems;
    }

    /** @return the topology under {@code <sysfs>/class/kfd/kfd/topology}, if that directory exists */
    public static Optional<KfdTopology> read(Path sysfsRoot) {
        Path topo = sysfsRoot.resolve("class/kfd/kfd/topology/nodes");
        return Files.isDirectory(topo) ? Optional.of(readNodes(topo)) : Optional.empty();
    }

    /** Reads a {@code nodes/} directory directly. */
    public static KfdTopology readNodes(Path nodesDir) {
        List<Node> nodes = new ArrayList<>();
        List<String> problems = new ArrayList<>();
        for (Path dir : list(nodesDir, problems)) {
            String name = dir.getFileName().toString();
            if (!name.matches("[0-9]{1,6}")) {
                continue;
            }
            Path props = dir.resolve("properties");
            if (!Files.isRegularFile(props)) {
                problems.add(props + ": missing");
                continue;
            }
            int before = problems.size();
            Map<String, Long> p = properties(props, problems);
            OptionalLong gpuId = single(dir.resolve("gpu_id"), problems);
            if (p.isEmpty() && problems.size() == before) {
                problems.add(props + ": empty" + (gpuId.orElse(0) != 0
                        ? " although gpu_id is " + Long.toUnsignedString(gpuId.getAsLong()) + " (a GPU node): skipped"
                        : "; the node cannot be told apart from a CPU node"));
            } else if (p.isEmpty()) {
                problems.add(props + ": no readable property; node " + name + " skipped");
            }
            OptionalLong bank = OptionalLong.empty();
            Path bank0 = dir.resolve("mem_banks/0/properties");
            if (Files.isRegularFile(bank0)) {
                Long size = properties(bank0, problems).get("size_in_bytes");
                bank = size == null ? OptionalLong.empty() : OptionalLong.of(size);
            }
            List<IoLink> links = new ArrayList<>();
            Path linksDir = dir.resolve("io_links");
            if (Files.isDirectory(linksDir)) {
                for (Path l : list(linksDir, problems)) {
                    if (!l.getFileName().toString().matches("[0-9]{1,6}")) {
                        continue;
                    }
                    Path lprops = l.resolve("properties");
                    if (!Files.isRegularFile(lprops)) {
                        problems.add(lprops + ": missing");
                        continue;
                    }
                    Map<String, Long> lp = properties(lprops, problems);
                    if (lp.containsKey("type") && lp.containsKey("node_from") && lp.containsKey("node_to")) {
                        links.add(new IoLink(lp.get("type"), lp.get("node_from"), lp.get("node_to"),
                                lp.getOrDefault("weight", 0L)));
                    }
                }
            }
            nodes.add(new Node(Integer.parseInt(name), p, gpuId, bank, links));
        }
        nodes.sort(Comparator.comparingInt(Node::id));
        return new KfdTopology(nodesDir, nodes, problems);
    }

    private static List<Path> list(Path dir, List<String> problems) {
        try (Stream<Path> s = Files.list(dir)) {
            return s.sorted().toList();
        } catch (IOException e) {
            problems.add(dir + ": cannot list (" + e.getMessage() + ")");
            return List.of();
        }
    }

    /** Largest file read as a sysfs attribute; the kernel's are at most a page (4 KiB). */
    static final int MAX_ATTRIBUTE_BYTES = 64 * 1024;

    /**
     * Reads a sysfs attribute as strict UTF-8, at most {@link #MAX_ATTRIBUTE_BYTES}: a larger file (a sparse giant,
     * a link to an endless device) is refused with an IOException instead of filling the heap.
     */
    static String readBounded(Path file) throws IOException {
        byte[] b;
        try (InputStream in = Files.newInputStream(file)) {
            b = in.readNBytes(MAX_ATTRIBUTE_BYTES + 1);
        }
        if (b.length > MAX_ATTRIBUTE_BYTES) {
            throw new IOException("larger than " + MAX_ATTRIBUTE_BYTES + " bytes, not a sysfs attribute");
        }
        return StandardCharsets.UTF_8.newDecoder()
                .decode(ByteBuffer.wrap(b)).toString();
    }

    /** @return {@code s} on one line: line breaks and other control characters escaped ({@code \n}, {@code \u0000}) */
    static String oneLine(String s) {
        StringBuilder b = new StringBuilder(s.length());
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '\n') {
                b.append("\\n");
            } else if (c == '\r') {
                b.append("\\r");
            } else if (Character.isISOControl(c) || c == '\u2028' || c == '\u2029') {
                b.append(String.format(Locale.ROOT, "\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.toString();
    }

    /** Parses "key value" lines; a line that is not a key and an unsigned integer is a problem, not a failure. */
    static Map<String, Long> properties(Path file, List<String> problems) {
        Map<String, Long> out = new LinkedHashMap<>();
        List<String> lines;
        try {
            lines = readBounded(file).lines().toList();
        } catch (IOException | UncheckedIOException e) {
            problems.add(file + ": unreadable (" + e.getMessage() + ")");
            return out;
        }
        Set<String> ambiguous = new LinkedHashSet<>();
        for (int i = 0; i < lines.size(); i++) {
            String line = lines.get(i).trim();
            if (line.isEmpty()) {
                continue;
            }
            String[] f = line.split("\\s+");
            if (f.length != 2 || !f[1].matches("[0-9]{1,20}")) {
                problems.add(file + ":" + (i + 1) + ": malformed line \"" + line + "\"");
                continue;
            }
            try {
                Long v = Long.parseUnsignedLong(f[1]);
                Long before = out.putIfAbsent(f[0], v);
                if (before != null && !before.equals(v) && ambiguous.add(f[0])) {
                    problems.add(file + ":" + (i + 1) + ": " + f[0] + " given twice with different values ("
                            + Long.toUnsignedString(before) + ", " + f[1] + "): taken as absent");
                }
            } catch (NumberFormatException e) {
                problems.add(file + ":" + (i + 1) + ": value out of range \"" + line + "\"");
            }
        }
        out.keySet().removeAll(ambiguous);
        return out;
    }

    private static OptionalLong single(Path file, List<String> problems) {
        if (!Files.isRegularFile(file)) {
            return OptionalLong.empty();
        }
        try {
            String s = readBounded(file).trim();
            if (s.matches("[0-9]{1,20}")) {
                return OptionalLong.of(Long.parseUnsignedLong(s));
            }
            problems.add(file + ": malformed \"" + s + "\"");
        } catch (IOException | NumberFormatException e) {
            problems.add(file + ": unreadable (" + e.getMessage() + ")");
        }
        return OptionalLong.empty();
    }

    /** @return "gfx90a" for 90010, "gfx942" for 90402, "gfx1100" for 110000 */
    public static String gfxTarget(long version) {
        long major = version / 10000;
        long minor = (version / 100) % 100;
        long stepping = version % 100;
        return "gfx" + major + Long.toHexString(minor) + Long.toHexString(stepping);
    }
}
