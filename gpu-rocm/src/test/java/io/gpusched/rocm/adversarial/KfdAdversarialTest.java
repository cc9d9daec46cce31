package io.gpusched.rocm.adversarial;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.gpusched.core.BackendUnavailableException;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.PcieLevel;
import io.gpusched.rocm.KfdSysfsInventory;
import io.gpusched.rocm.KfdSysfsInventoryProvider;
import io.gpusched.rocm.KfdTopology;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Hostile KFD trees against the pure-Java AMD inventory: one bad node or value never takes the others down, unknown
 * memory is never reported as known, partitions of one package are each other's closest peers. Expectations come from
 * the files themselves (parsed here independently), never from the inventory.
 */
@Tag("adversarial")
class KfdAdversarialTest {

    static final Clock CLOCK = Clock.systemUTC();
    /** The real KFD captures copied into this module (src/test/resources/fixtures/amd/INDEX.txt names their source). */
    static final Path FIXTURES = Paths.get("src", "test", "resources", "fixtures", "amd", "k8s-device-plugin",
            "testdata");

    @TempDir
    Path tmp;

    /** Node 0 CPU, node 1 a good GPU on bus 0x10 (minor 128). */
    AdvTree base() {
        return new AdvTree(tmp.resolve("sys")).cpu(0).gpu(1, 0x10, 128);
    }

    static KfdSysfsInventory open(AdvTree t) {
        return KfdSysfsInventory.open(t.root, CLOCK);
    }

    static Optional<GpuDevice> byNode(KfdSysfsInventory inv, int node) {
        return inv.devices().stream().filter(d -> Integer.toString(node).equals(d.properties().get("kfd.node")))
                .findFirst();
    }

    static boolean mentionsNode(List<String> problems, int node) {
        Pattern p = Pattern.compile("(?i)(nodes/" + node + "\\b|node " + node + "\\b)");
        return problems.stream().anyMatch(l -> p.matcher(l).find());
    }

    static void assertGoodNodeServed(KfdSysfsInventory inv) {
        GpuDevice d = byNode(inv, 1).orElseThrow(() -> new AssertionError("good node 1 not served: " + inv.devices()
                + " problems " + inv.problems()));
        assertEquals(128, d.minor().orElse(-1));
        assertTrue(d.memoryKnown());
        assertEquals(51539607552L, d.memory().bytes());
    }

    // ---- one bad value on node 2 ----

    @ParameterizedTest
    @ValueSource(strings = {"4294967295", "2147483648", "1048576", "-1", "18446744073709551615", "18446744073709551616",
        "99999999999999999999999", "0x81", "1e3", "129 130", "", "\u0000129"})
    void badRenderMinorSkipsOnlyThatNode(String minor) {
        AdvTree t = base();
        t.gpu(2, AdvTree.gpuProps(0x20, 0, 0, "2002", "").replace("drm_render_minor 0\n",
                "drm_render_minor " + minor + "\n"), 40002);
        t.bank(2, "size_in_bytes 51539607552\n");
        KfdSysfsInventory inv = open(t);
        assertGoodNodeServed(inv);
        assertTrue(byNode(inv, 2).isEmpty(),
                "node 2 with drm_render_minor '" + minor + "' served as " + byNode(inv, 2));
        assertTrue(mentionsNode(inv.problems(), 2), "node 2 skipped silently: " + inv.problems());
    }

    @ParameterizedTest
    @ValueSource(strings = {"18446744073709551615", "9223372036854775808", "9223372036854775807", "0", "-5", "abc",
        "17592186044417", "0x1000000000", ""})
    void unbelievableLocalMemSizeWithoutBanksIsUnknown(String size) {
        AdvTree t = base();
        t.gpu(2, AdvTree.gpuProps(0x20, 0, 129, "2002", "").replace("local_mem_size 0\n",
                "local_mem_size " + size + "\n"), 40002);
        KfdSysfsInventory inv = open(t);
        assertGoodNodeServed(inv);
        byNode(inv, 2).ifPresent(d -> {
            assertFalse(d.memoryKnown(), "local_mem_size '" + size + "' read as known " + d.memory());
            assertEquals(0L, d.memory().bytes());
        });
        assertTrue(mentionsNode(inv.problems(), 2), "no problem recorded for node 2: " + inv.problems());
    }

    @ParameterizedTest
    @ValueSource(strings = {"size_in_bytes 0\n", "size_in_bytes 18446744073709551615\n", "size_in_bytes -1\n",
        "size_in_bytes 1e9\n", "", "size_in_bytes\n", "size_in_bytes 12 34\n"})
    void unbelievableBankSizeIsUnknown(String bank) {
        AdvTree t = base();
        t.gpu(2, AdvTree.gpuProps(0x20, 0, 129, "2002", ""), 40002);
        t.bank(2, bank);
        KfdSysfsInventory inv = open(t);
        assertGoodNodeServed(inv);
        byNode(inv, 2)
                .ifPresent(d -> assertFalse(d.memoryKnown(), "bank '" + bank.strip() + "' read as " + d.memory()));
        assertTrue(mentionsNode(inv.problems(), 2), "no problem recorded for node 2: " + inv.problems());
    }

    @Test
    void conflictingDuplicateBankSizeIsNotTakenAsKnown() {
        AdvTree t = base();
        t.gpu(2, AdvTree.gpuProps(0x20, 0, 129, "2002", ""), 40002);
        t.bank(2, "size_in_bytes 1024\nsize_in_bytes 51539607552\n");
        KfdSysfsInventory inv = open(t);
        assertGoodNodeServed(inv);
        assertTrue(mentionsNode(inv.problems(), 2), "conflicting duplicate key not reported: " + inv.problems());
    }

    @Test
    void bankFileThatIsADirectoryIsUnknownMemory() {
        AdvTree t = base();
        t.gpu(2, AdvTree.gpuProps(0x20, 0, 129, "2002", ""), 40002);
        AdvTree.mkdirs(t.node(2).resolve("mem_banks/0/properties"));
        KfdSysfsInventory inv = open(t);
        assertGoodNodeServed(inv);
        byNode(inv, 2).ifPresent(d -> assertFalse(d.memoryKnown()));
        assertTrue(mentionsNode(inv.problems(), 2), inv.problems().toString());
    }

    /** CRLF line ends, trailing blanks, tabs: the node is either read right or reported; never lost silently. */
    @ParameterizedTest
    @ValueSource(strings = {"\r\n", " \n", "\t\n", "\n\n"})
    void oddLineEndsNeverLoseANodeSilently(String eol) {
        AdvTree t = base();
        t.gpu(2, AdvTree.gpuProps(0x20, 0, 129, "2002", "").replace("\n", eol), 40002);
        t.bank(2, "size_in_bytes 51539607552\n");
        KfdSysfsInventory inv = open(t);
        assertGoodNodeServed(inv);
        Optional<GpuDevice> d = byNode(inv, 2);
        if (d.isPresent()) {
            assertEquals(129, d.get().minor().orElse(-1));
        } else {
            assertTrue(mentionsNode(inv.problems(), 2), "node 2 vanished silently: " + inv.problems());
        }
    }

    @Test
    void emptyPropertiesOfAGpuNodeIsReported() {
        AdvTree t = base();
        t.gpu(2, "", 40002);
        KfdSysfsInventory inv = open(t);
        assertGoodNodeServed(inv);
        assertTrue(mentionsNode(inv.problems(), 2), inv.problems().toString());
    }

    // ---- shapes: directories for files, files for directories, loops ----

    static Stream<String> shapes() {
        return Stream.of("properties-is-dir", "gpu_id-is-dir", "io_links-is-file", "io_link-is-file",
                "io_link-properties-is-dir", "mem_banks-is-file", "node-is-file", "node-self-symlink",
                "node-symlink-to-nodes", "io_links-symlink-loop", "properties-dangling-symlink", "nul-bytes",
                "binary-garbage");
    }

    @ParameterizedTest
    @MethodSource("shapes")
    void oneBadShapeNeverTakesTheGoodNodeDown(String shape) throws IOException {
        AdvTree t = base();
        t.gpu(2, 0x20, 129);
        Path n = t.node(2);
        switch (shape) {
            case "properties-is-dir" -> {
                Files.delete(n.resolve("properties"));
                Files.createDirectories(n.resolve("properties/x"));
            }
            case "gpu_id-is-dir" -> {
                Files.delete(n.resolve("gpu_id"));
                Files.createDirectories(n.resolve("gpu_id"));
            }
            case "io_links-is-file" -> {
                AdvTree.run("rm", "-rf", n.resolve("io_links").toString());
                Files.writeString(n.resolve("io_links"), "0\n");
            }
            case "io_link-is-file" -> {
                AdvTree.run("rm", "-rf", n.resolve("io_links/0").toString());
                Files.writeString(n.resolve("io_links/0"), "type 2\n");
            }
            case "io_link-properties-is-dir" -> {
                Files.delete(n.resolve("io_links/0/properties"));
                Files.createDirectories(n.resolve("io_links/0/properties"));
            }
            case "mem_banks-is-file" -> {
                AdvTree.run("rm", "-rf", n.resolve("mem_banks").toString());
                Files.writeString(n.resolve("mem_banks"), "size_in_bytes 1\n");
            }
            case "node-is-file" -> {
                AdvTree.run("rm", "-rf", n.toString());
                Files.writeString(n, AdvTree.gpuProps(0x20, 0, 129, "2", ""));
            }
            case "node-self-symlink" -> {
                AdvTree.run("rm", "-rf", n.toString());
                Files.createSymbolicLink(n, Paths.get("2"));
            }
            case "node-symlink-to-nodes" -> {
                AdvTree.run("rm", "-rf", n.toString());
                Files.createSymbolicLink(n, Paths.get("."));
            }
            case "io_links-symlink-loop" -> {
                AdvTree.run("rm", "-rf", n.resolve("io_links").toString());
                Files.createDirectories(n.resolve("io_links"));
                Files.createSymbolicLink(n.resolve("io_links/0"), Paths.get(".."));
                Files.createSymbolicLink(n.resolve("io_links/1"), Paths.get("1"));
            }
            case "properties-dangling-symlink" -> {
                Files.delete(n.resolve("properties"));
                Files.createSymbolicLink(n.resolve("properties"), Paths.get("/nonexistent/kfd/properties"));
            }
            case "nul-bytes" -> Files.write(n.resolve("properties"), new byte[]{0, 0, 0, '\n', 0, 's', 0});
            case "binary-garbage" -> {
                byte[] b = new byte[8192];
                new java.util.Random(13).nextBytes(b);
                Files.write(n.resolve("properties"), b);
            }
            default -> fail(shape);
        }
        KfdSysfsInventory inv = assertTimeoutPreemptively(Duration.ofSeconds(30), () -> open(t));
        assertGoodNodeServed(inv);
        for (GpuDevice d : inv.devices()) {
            assertTrue(d.minor().orElse(0) >= 0 && d.minor().orElse(0) <= 1048575, d.toString());
        }
        inv.sample();
        inv.close();
    }

    /** Files no kernel writes: a sparse giant, an endless device, a FIFO nobody writes to. */
    @ParameterizedTest
    @ValueSource(strings = {"sparse-properties", "sparse-gpu_id", "sparse-bank", "sparse-io_link", "zero-properties",
        "fifo-properties", "fifo-gpu_id", "fifo-bank", "fifo-io_link"})
    void filesNoKernelWritesNeitherHangNorExhaustTheHeap(String attack) throws Exception {
        AdvTree t = base();
        t.gpu(2, 0x20, 129);
        String kind = attack.substring(0, attack.indexOf('-'));
        Path target = switch (attack.substring(attack.indexOf('-') + 1)) {
            case "properties" -> t.node(2).resolve("properties");
            case "gpu_id" -> t.node(2).resolve("gpu_id");
            case "bank" -> t.node(2).resolve("mem_banks/0/properties");
            default -> t.node(2).resolve("io_links/0/properties");
        };
        Files.delete(target);
        switch (kind) {
            case "sparse" -> {
                try (var f = new java.io.RandomAccessFile(target.toFile(), "rw")) {
                    f.write("simd_count 80\n".getBytes(StandardCharsets.US_ASCII));
                    f.setLength(3L << 30); // 3 GiB of NULs, no disk used
                }
            }
            case "zero" -> Files.createSymbolicLink(target, Paths.get("/dev/zero"));
            default -> AdvTree.run("mkfifo", target.toString());
        }
        try {
            KfdSysfsInventory inv = assertTimeoutPreemptively(Duration.ofSeconds(30), () -> open(t));
            assertGoodNodeServed(inv);
            assertTrue(mentionsNode(inv.problems(), 2) || byNode(inv, 2).isPresent(), inv.problems().toString());
            byNode(inv, 2).ifPresent(d -> {
                if (attack.endsWith("bank")) {
                    assertFalse(d.memoryKnown());
                }
            });
            Optional<String> c = new KfdSysfsInventoryProvider(t.root).unavailabilityCause();
            assertTrue(c.isEmpty(), c.toString());
        } finally {
            if (kind.equals("fifo")) { // release a reader stuck on the FIFO, if any
                try (var w = new java.io.RandomAccessFile(target.toFile(), "rw")) {
                    w.write('\n');
                }
            }
        }
    }

    /** Lying DRM metric files of GPU 0 never cost GPU 1 its metrics, and no value outside its range is reported. */
    @ParameterizedTest
    @ValueSource(strings = {"-5", "-1", "250", "99999999999999999999", "-99999999999999999999", "0x10", ""})
    void lyingDrmMetricsStayOnTheirDevice(String v) throws IOException {
        AdvTree t = base();
        t.gpu(2, 0x20, 129);
        for (int minor : new int[]{128, 129}) {
            Path dev = t.root.resolve("class/drm/renderD" + minor + "/device");
            Path hw = dev.resolve("hwmon/hwmon0");
            Files.createDirectories(hw);
            boolean bad = minor == 128;
            Files.writeString(dev.resolve("gpu_busy_percent"), (bad ? v : "42") + "\n");
            Files.writeString(dev.resolve("mem_info_vram_used"), (bad ? v : "1048576") + "\n");
            Files.writeString(hw.resolve("temp1_input"), (bad ? v + "000" : "50000") + "\n");
            Files.writeString(hw.resolve("temp1_label"), "edge\n");
            Files.writeString(hw.resolve("power1_average"), (bad ? v : "300000000") + "\n");
        }
        KfdSysfsInventory inv = open(t);
        io.gpusched.core.GpuSample s = inv.sample();
        io.gpusched.core.GpuMetrics good = s.forDevice(byNode(inv, 2).orElseThrow().index()).orElseThrow();
        assertEquals(42.0, good.utilizationPercent().orElseThrow());
        assertEquals(1048576L, good.memoryUsed().orElseThrow().bytes());
        assertEquals(50.0, good.temperatureCelsius().orElseThrow());
        assertEquals(300.0, good.powerWatts().orElseThrow());
        io.gpusched.core.GpuMetrics lying = s.forDevice(byNode(inv, 1).orElseThrow().index()).orElseThrow();
        lying.utilizationPercent().ifPresent(u -> assertTrue(u >= 0 && u <= 100, "utilization " + u));
        lying.memoryUsed().ifPresent(m -> assertTrue(m.bytes() <= 51539607552L, "VRAM used " + m));
        lying.temperatureCelsius().ifPresent(c -> assertTrue(c > -274 && c < 1000, "temperature " + c));
        lying.powerWatts().ifPresent(w -> assertTrue(w >= 0 && w < 100000, "power " + w));
    }

    // ---- identity ----

    @ParameterizedTest
    @ValueSource(strings = {"0", "absent"})
    void twoWholeGpusWithoutAUniqueIdAreNotPartitionsOfOneGpu(String uid) {
        AdvTree t = new AdvTree(tmp.resolve("sys")).cpu(0);
        for (int i = 1; i <= 2; i++) {
            t.gpu(i, AdvTree.gpuProps(0x10 * i, 0, 127 + i, "absent".equals(uid) ? null : uid, ""), 40000 + i);
            t.bank(i, "size_in_bytes 17163091968\n");
            t.link(i, 0, 2, 0, 20);
        }
        KfdSysfsInventory inv = open(t);
        assertEquals(2, inv.devices().size(), inv.devices() + " " + inv.problems());
        for (GpuDevice d : inv.devices()) {
            assertFalse(d.isPartition(), "whole GPU on its own bus taken for a partition: " + d);
        }
        assertEquals(2, new HashSet<>(inv.devices().stream().map(GpuDevice::uuid).toList()).size());
        assertTrue(inv.topology().pcieLevel(0, 1) != PcieLevel.INTERNAL, "two boards read as one");
    }

    @Test
    void duplicateGpuIdsAndBusIdsNeverYieldDuplicateIdentities() {
        AdvTree t = base();
        t.gpu(2, AdvTree.gpuProps(0x10, 0, 129, "1001", ""), 40001); // same bus, gpu_id and unique_id as node 1
        t.bank(2, "size_in_bytes 51539607552\n");
        KfdSysfsInventory inv = open(t);
        Set<String> uuids = new HashSet<>();
        Set<Integer> minors = new HashSet<>();
        for (GpuDevice d : inv.devices()) {
            assertTrue(uuids.add(d.uuid()), "duplicate uuid " + d.uuid() + " in " + inv.devices());
            assertTrue(minors.add(d.minor().orElse(-1)), "duplicate minor " + d.minor());
        }
        assertFalse(inv.devices().isEmpty());
    }

    @Test
    void duplicateRenderMinorNeverServedTwice() {
        AdvTree t = base();
        t.gpu(2, 0x20, 128);
        KfdSysfsInventory inv = open(t);
        long n = inv.devices().stream().filter(d -> d.minor().orElse(-1) == 128).count();
        assertTrue(n <= 1, "render minor 128 handed out twice: " + inv.devices());
        assertFalse(inv.problems().isEmpty());
    }

    // ---- topology ----

    /** Closeness of a pair: more links first, then nearer PCIe level. */
    static int compareCloseness(GpuTopology topo, int a, int b, int c) {
        int l = Integer.compare(topo.linkCount(a, b), topo.linkCount(a, c));
        return l != 0 ? l : -Integer.compare(topo.pcieLevel(a, b).ordinal(), topo.pcieLevel(a, c).ordinal());
    }

    /** Every partition's siblings (same unique_id, read from the files here) are strictly closer than any other. */
    static void assertSiblingsClosest(KfdSysfsInventory inv, Map<Integer, String> uniqueIdByNode) {
        GpuTopology topo = inv.topology();
        List<GpuDevice> ds = inv.devices();
        for (GpuDevice a : ds) {
            String ua = uniqueIdByNode.get(Integer.parseInt(a.properties().get("kfd.node")));
            for (GpuDevice s : ds) {
                if (s == a || !ua.equals(uniqueIdByNode.get(Integer.parseInt(s.properties().get("kfd.node"))))) {
                    continue;
                }
                for (GpuDevice o : ds) {
                    if (ua.equals(uniqueIdByNode.get(Integer.parseInt(o.properties().get("kfd.node"))))) {
                        continue;
                    }
                    assertTrue(compareCloseness(topo, a.index(), s.index(), o.index()) > 0,
                            "sibling " + s.index() + " of " + a.index() + " (links "
                                    + topo.linkCount(a.index(), s.index())
                                    + ", " + topo.pcieLevel(a.index(), s.index()) + ") not closer than "
                                    + o.index() + " (links " + topo.linkCount(a.index(), o.index()) + ", "
                                    + topo.pcieLevel(a.index(), o.index()) + ")");
                }
            }
        }
    }

    static Map<String, String> props(Path file) throws IOException {
        Map<String, String> m = new HashMap<>();
        for (String l : Files.readAllLines(file, StandardCharsets.ISO_8859_1)) {
            String[] kv = l.trim().split("\\s+");
            if (kv.length == 2) {
                m.put(kv[0], kv[1]);
            }
        }
        return m;
    }

    static Map<Integer, String> uniqueIds(Path nodes) throws IOException {
        Map<Integer, String> m = new HashMap<>();
        try (Stream<Path> s = Files.list(nodes)) {
            for (Path n : s.toList()) {
                m.put(Integer.parseInt(n.getFileName().toString()),
                        props(n.resolve("properties")).getOrDefault("unique_id", "none-" + n.getFileName()));
            }
        }
        return m;
    }

    @ParameterizedTest
    @ValueSource(strings = {"topology-parsing-mi308/topology/nodes", "topo-mi300-cpx/topology/nodes"})
    void capturedCpxPartitionsAreEachOthersClosestPeers(String fixture) throws IOException {
        Path nodes = FIXTURES.resolve(fixture);
        assertTrue(Files.isDirectory(nodes), "the captures copied into the module: " + nodes.toAbsolutePath());
        KfdSysfsInventory inv = KfdSysfsInventory.from(KfdTopology.readNodes(nodes), tmp, CLOCK);
        assertTrue(inv.devices().size() >= 32, inv.devices().size() + " devices");
        assertSiblingsClosest(inv, uniqueIds(nodes));
    }

    @Test
    void capturedMi210XgmiLinksMatchTheIoLinks() throws IOException {
        Path nodes = FIXTURES.resolve("topo-mi210-xgmi-pcie/nodes");
        assertTrue(Files.isDirectory(nodes), "the captures copied into the module: " + nodes.toAbsolutePath());
        KfdSysfsInventory inv = KfdSysfsInventory.from(KfdTopology.readNodes(nodes), tmp, CLOCK);
        assertEquals(8, inv.devices().size());
        Set<String> xgmi = new HashSet<>();
        try (Stream<Path> s = Files.walk(nodes)) {
            for (Path p : s.filter(p -> nodes.relativize(p).toString().contains("io_links/")
                    && p.endsWith("properties")).toList()) {
                Map<String, String> m = props(p);
                if ("11".equals(m.get("type"))) {
                    int a = Integer.parseInt(m.get("node_from"));
                    int b = Integer.parseInt(m.get("node_to"));
                    xgmi.add(Math.min(a, b) + "-" + Math.max(a, b));
                }
            }
        }
        GpuTopology topo = inv.topology();
        for (GpuDevice a : inv.devices()) {
            assertFalse(a.isPartition());
            for (GpuDevice b : inv.devices()) {
                if (a.index() >= b.index()) {
                    continue;
                }
                int na = Integer.parseInt(a.properties().get("kfd.node"));
                int nb = Integer.parseInt(b.properties().get("kfd.node"));
                boolean linked = xgmi.contains(Math.min(na, nb) + "-" + Math.max(na, nb));
                assertEquals(linked, topo.linkCount(a.index(), b.index()) > 0, "nodes " + na + "," + nb);
                assertTrue(topo.pcieLevel(a.index(), b.index()) != PcieLevel.INTERNAL);
            }
        }
    }

    /** Two packages of two partitions; XGMI weights as given (same package {@code in}, across {@code across}). */
    AdvTree twoPackages(String in, String inBack, String across) {
        AdvTree t = new AdvTree(tmp.resolve("sys")).cpu(0);
        int[][] pk = {{1, 2}, {3, 4}};
        int minor = 128;
        for (int p = 0; p < 2; p++) {
            for (int q = 0; q < 2; q++) {
                int n = pk[p][q];
                t.gpu(n, AdvTree.gpuProps(0x10 + 0x10 * p, q, minor++, "77" + p, ""), 50000 + n);
                t.bank(n, "size_in_bytes 51539607552\n");
                t.link(n, 0, 2, 0, 20);
            }
        }
        int[] idx = new int[5];
        for (int a = 1; a <= 4; a++) {
            idx[a] = 1;
        }
        for (int a = 1; a <= 4; a++) {
            for (int b = 1; b <= 4; b++) {
                if (a == b) {
                    continue;
                }
                boolean same = (a - 1) / 2 == (b - 1) / 2;
                t.link(a, idx[a]++, 11, b, same ? (a < b ? in : inBack) : across);
            }
        }
        return t;
    }

    static Stream<Arguments> weightSets() {
        return Stream.of(Arguments.of("13", "13", "41"), Arguments.of("13", "41", "41"),
                Arguments.of("0", "0", "41"), Arguments.of("13", "13", "0"),
                Arguments.of("13", "13", "18446744073709551615"), Arguments.of("18446744073709551615", "13", "41"),
                Arguments.of("13", "13", "9223372036854775808"), Arguments.of("1", "1", "4294967295"),
                Arguments.of("junk", "13", "41"));
    }

    @ParameterizedTest
    @MethodSource("weightSets")
    void oddWeightsNeverPutAnotherPackageBeforeASibling(String in, String back, String across) throws IOException {
        AdvTree t = twoPackages(in, back, across);
        KfdSysfsInventory inv = open(t);
        assertEquals(4, inv.devices().size(), inv.devices() + " " + inv.problems());
        assertSiblingsClosest(inv, uniqueIds(t.topology().resolve("nodes")));
        for (GpuTopology.Link l : inv.topology().links()) {
            assertTrue(l.linkCount() >= 0 && l.linkCount() <= 64, l.toString());
        }
    }

    @Test
    void linksToMissingNodesAndToThemselvesAreHarmless() {
        AdvTree t = base();
        t.gpu(2, 0x20, 129);
        t.link(1, 1, 11, 1, 13);
        t.link(1, 2, 11, 99, 13);
        t.link(2, 1, 11, 4294967296L, 13);
        t.link(2, 2, 11, 1, 15);
        KfdSysfsInventory inv = open(t);
        assertGoodNodeServed(inv);
        assertEquals(2, inv.devices().size());
        assertEquals(inv.topology().linkCount(0, 1), inv.topology().linkCount(1, 0));
        assertEquals(0, inv.topology().linkCount(0, 0));
    }

    @Test
    void nodeNumberingGapsAndStrayEntries() throws IOException {
        AdvTree t = new AdvTree(tmp.resolve("sys")).cpu(0);
        t.gpu(7, 0x10, 128).gpu(1000, 0x20, 129);
        Files.createDirectories(t.topology().resolve("nodes/foo"));
        Files.writeString(t.topology().resolve("nodes/.hidden"), "x");
        Files.createDirectories(t.topology().resolve("nodes/007"));
        KfdSysfsInventory inv = open(t);
        assertEquals(2, byNode(inv, 7).isPresent() && byNode(inv, 1000).isPresent() ? 2 : 0,
                inv.devices() + " " + inv.problems());
    }

    @Test
    void aThousandNodesOpenInBoundedTime() {
        AdvTree t = new AdvTree(tmp.resolve("sys")).cpu(0);
        for (int i = 1; i <= 1000; i++) {
            t.gpu(i, AdvTree.gpuProps(i / 8 + 1, i % 8, 127 + i, "9" + (i / 8), ""), 60000 + i);
            t.bank(i, "size_in_bytes 51539607552\n");
            t.link(i, 0, 2, 0, 20);
            int sib = (i % 8 == 7 || i == 1000) ? i - 1 : i + 1;
            t.link(i, 1, 11, sib, 13);
        }
        KfdSysfsInventory inv = assertTimeoutPreemptively(Duration.ofSeconds(60), () -> open(t));
        assertEquals(1000, inv.devices().size(), inv.problems().toString());
        assertEquals(1000, new HashSet<>(inv.devices().stream().map(GpuDevice::index).toList()).size());
    }

    // ---- provider: one-line causes, changes between probe and open ----

    @Test
    void providerCauseIsOneLineEvenForARootNamedWithANewline() throws IOException {
        Path root = Files.createDirectories(tmp.resolve("odd\nroot"));
        KfdSysfsInventoryProvider p = new KfdSysfsInventoryProvider(root);
        Optional<String> c = p.unavailabilityCause();
        assertTrue(c.isPresent());
        assertFalse(c.get().contains("\n") || c.get().contains("\r") || c.get().isBlank(), "cause: [" + c.get() + "]");
        AdvTree t = new AdvTree(root).cpu(0);
        Optional<String> c2 = new KfdSysfsInventoryProvider(root).unavailabilityCause();
        assertTrue(c2.isPresent(), "a tree of only a CPU node is no GPU");
        assertFalse(c2.get().contains("\n"), c2.get());
        t.gpu(1, AdvTree.gpuProps(0x10, 0, 5000000, "1", ""), 1);
        Optional<String> c3 = new KfdSysfsInventoryProvider(root).unavailabilityCause();
        c3.ifPresent(s -> assertFalse(s.contains("\n"), s));
    }

    @Test
    void rocmSmiProviderCauseIsOneLine() throws IOException {
        Path root = Files.createDirectories(tmp.resolve("odd\nroot"));
        Optional<String> c = new io.gpusched.rocm.RocmSmiInventoryProvider(
                Optional.of(root.resolve("lib\nrocm_smi64.so")), root, root, false).unavailabilityCause();
        assertTrue(c.isPresent());
        assertFalse(c.get().contains("\n") || c.get().contains("\r") || c.get().isBlank(), "cause: [" + c.get() + "]");
    }

    @Test
    void treeRemovedBetweenProbeAndOpenIsATypedError() throws IOException {
        AdvTree t = base();
        KfdSysfsInventoryProvider p = new KfdSysfsInventoryProvider(t.root);
        assertTrue(p.unavailabilityCause().isEmpty(), p.unavailabilityCause().toString());
        AdvTree.run("rm", "-rf", t.node(1).toString());
        BackendUnavailableException e = assertThrows(BackendUnavailableException.class,
                () -> p.open(GpuConfig.defaults()));
        assertFalse(e.getMessage().contains("\n"), e.getMessage());
    }

    @Test
    void concurrentOpensAgree() throws Exception {
        AdvTree t = base();
        t.gpu(2, 0x20, 129);
        KfdSysfsInventoryProvider p = new KfdSysfsInventoryProvider(t.root);
        List<Thread> ts = new ArrayList<>();
        List<Throwable> errors = java.util.Collections.synchronizedList(new ArrayList<>());
        List<Integer> sizes = java.util.Collections.synchronizedList(new ArrayList<>());
        for (int i = 0; i < 8; i++) {
            Thread th = new Thread(() -> {
                try (var inv = p.open(GpuConfig.defaults())) {
                    sizes.add(inv.devices().size());
                } catch (Throwable e) {
                    errors.add(e);
                }
            });
            ts.add(th);
            th.start();
        }
        for (Thread th : ts) {
            th.join();
        }
        assertTrue(errors.isEmpty(), errors.toString());
        assertEquals(List.of(2, 2, 2, 2, 2, 2, 2, 2), sizes);
    }
}
