package io.gpusched.slurm.adversarial;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.sim.NodeDescriptions;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.slurm.CpuLayout;
import io.gpusched.slurm.GresConfException;
import io.gpusched.slurm.GresConfParser;
import io.gpusched.slurm.GresRecord;
import io.gpusched.slurm.SlurmGres;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.TimeZone;
import org.junit.jupiter.api.Disabled;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Adversarial review of issue 26 (gres.conf): hostile node descriptions and hand-written drifted files, judged only
 * against README "Slurm and containers" and the public Javadoc. Checks are computed independently in the test.
 */
@Tag("adversarial")
class GresAdversarialTest {
    static final CpuLayout TWO = CpuLayout.uniform(2, 4);

    static SlurmGres gres(GpuInventory inv, CpuLayout cpus) {
        return SlurmGres.of(inv, new SlurmGres.Options(Path.of("/dev"), Path.of("/nonexistent-proc"), cpus));
    }

    static SimulatedGpuInventory node(String devices, String links) {
        String y = "node: adv\ndescription: adversarial\ndefaults: {vendor: NVIDIA, name: NVIDIA A100-SXM4-40GB, "
                + "memory: 40GiB, compute_capability: \"8.0\"}\ndevices:\n" + devices + (links == null ? "" : links);
        return NodeDescriptions.parse(y, "adv.yaml");
    }

    static String dev(int i, String extra) {
        return String.format("  - {index: %d, pci_bus_id: \"00000000:%02X:00.0\"%s}%n", i, 0x10 + i, extra);
    }

    /** Independent check of a generated file: one line per device, Links square, symmetric, -1 on the diagonal. */
    static void assertWellFormed(SlurmGres g, int expectedRecords, int coreCount) {
        List<GresRecord> recs = GresConfParser.parse(g.gresConf(), Optional.empty());
        assertThat(recs).hasSize(expectedRecords);
        List<String> files = new ArrayList<>();
        recs.forEach(r -> files.addAll(r.files()));
        assertThat(files).doesNotHaveDuplicates();
        for (int i = 0; i < recs.size(); i++) {
            GresRecord r = recs.get(i);
            r.cores().ifPresent(c -> assertThat(c).allSatisfy(x -> assertThat(x).isBetween(0, coreCount - 1)));
            if (r.links().isPresent()) {
                List<Integer> l = r.links().get();
                assertThat(l).as("Links of line %d", i).hasSize(recs.size());
                assertThat(l.get(i)).isEqualTo(-1);
                for (int j = 0; j < recs.size(); j++) {
                    if (j != i) {
                        assertThat(recs.get(j).links()).isPresent();
                        assertThat(l.get(j)).as("Links[%d][%d] symmetric", i, j)
                                .isEqualTo(recs.get(j).links().get().get(i)).isGreaterThanOrEqualTo(0);
                    }
                }
            }
            assertThat(r.type()).isPresent();
            assertThat(r.type().get()).as("Type is one Slurm token").matches("[A-Za-z0-9_.-]+");
        }
        assertThat(g.check(recs)).as("own output is not drift").isEmpty();
    }

    @Test
    void oneGpuNoNumaNoMinorWritesAValidFile() {
        try (SimulatedGpuInventory inv = node(dev(0, ""), null)) {
            assertWellFormed(gres(inv, TWO), 1, 8);
        }
    }

    @Test
    void sixtyFourGpusFabricIsSquareSymmetricAndRoundTrips() {
        StringBuilder d = new StringBuilder();
        for (int i = 0; i < 64; i++) {
            d.append(String.format("  - {index: %d, pci_bus_id: \"00000000:%02X:00.0\", numa_node: %d}%n", i,
                    0x80 - i /* reverse PCI order vs index */, i % 2));
        }
        try (SimulatedGpuInventory inv = node(d.toString(), "fabric_links: 18\n")) {
            SlurmGres g = gres(inv, TWO);
            assertWellFormed(g, 64, 8);
            // PCI bus order: File= of consecutive lines have ascending bus ids = descending index here
            List<GresRecord> recs = g.records();
            assertThat(recs.get(0).files()).containsExactly("/dev/nvidia63");
            assertThat(g.gresValue()).isEqualTo("gpu:a100:64");
        }
    }

    @Test
    void mixedModelsOneTypePerModelAndCountsAdd() {
        String d = dev(0, ", name: NVIDIA A100-SXM4-40GB") + dev(1, ", name: NVIDIA A10")
                + dev(2, ", name: NVIDIA A100-SXM4-80GB") + dev(3, ", name: NVIDIA H100 80GB HBM3");
        try (SimulatedGpuInventory inv = node(d, "links: [[0, 2, 12]]\n")) {
            SlurmGres g = gres(inv, TWO);
            assertWellFormed(g, 4, 8);
            Map<String, Integer> n = new HashMap<>();
            for (GresRecord r : g.records()) {
                n.merge(r.type().get(), 1, Integer::sum);
            }
            int sum = 0;
            for (String part : g.gresValue().split(",")) {
                String[] p = part.split(":");
                assertThat(p).hasSize(3);
                assertThat(p[0]).isEqualTo("gpu");
                assertThat(n).containsEntry(p[1], Integer.parseInt(p[2]));
                sum += Integer.parseInt(p[2]);
            }
            assertThat(sum).isEqualTo(4);
        }
    }

    @Test
    void hostileModelNameStaysOneToken() {
        // a control character (a tab) in a name is refused where node descriptions enter (issue 36)
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> node(dev(0, ", name: \"NVIDIA \\tX100\""), null))
                .isInstanceOf(io.gpusched.core.GpuConfigException.class).hasMessageContaining("name");
        String d = dev(0, ", name: \"Weird GPU=x #1: a,b\"") + dev(1, ", name: \"NVIDIA \u00c9tude  X100\"");
        try (SimulatedGpuInventory inv = node(d, null)) {
            SlurmGres g = gres(inv, TWO);
            for (GresRecord r : g.records()) {
                assertThat(r.type().get()).matches("[A-Za-z0-9_.-]+");
            }
            assertThat(g.gresValue().split(",")).allSatisfy(p -> assertThat(p.split(":")).hasSize(3));
            assertWellFormed(g, 2, 8);
        }
    }

    @Test
    void unhealthyAndLostLeftOutWithReasonAndLinksRenumbered() {
        String d = dev(0, ", numa_node: 0") + dev(1, ", numa_node: 0") + dev(2, ", numa_node: 1");
        try (SimulatedGpuInventory inv = node(d, "links: [[0, 1, 4], [1, 2, 2], [0, 2, 1]]\n")) {
            inv.setHealth(1, GpuHealth.lost("fell off the bus"));
            SlurmGres g = gres(inv, TWO);
            String text = g.gresConf();
            assertThat(text).doesNotContain("File=/dev/nvidia1 ").contains("fell off the bus");
            assertWellFormed(g, 2, 8);
            // the pair 0-2 has one link: positions follow the lines that remain
            assertThat(g.records().get(0).links()).contains(List.of(-1, 1));
            assertThat(g.gresValue()).isEqualTo("gpu:a100:2");
        }
    }

    @Test
    void healthReasonWithNewlineCannotInjectAGresLine() {
        String d = dev(0, "") + dev(1, "");
        try (SimulatedGpuInventory inv = node(d, null)) {
            inv.setHealth(1, GpuHealth.unhealthy("xid 79\nName=gpu Type=evil File=/dev/nvidia9"));
            SlurmGres g = gres(inv, TWO);
            List<GresRecord> recs = GresConfParser.parse(g.gresConf(), Optional.empty());
            assertThat(recs).hasSize(1);
            assertThat(g.gresConf()).doesNotContain("\nName=gpu Type=evil");
        }
    }

    @Test
    void healthReasonWithCarriageReturnOrUnicodeBreakCannotInjectAGresLine() {
        String d = dev(0, "") + dev(1, "");
        for (String br : List.of("\r", "\r\n", "\u2028", "\u0085")) {
            try (SimulatedGpuInventory inv = node(d, null)) {
                inv.setHealth(1, GpuHealth.unhealthy("xid 79" + br + "Name=gpu Type=evil File=/dev/nvidia9"));
                SlurmGres g = gres(inv, TWO);
                assertThat(GresConfParser.parse(g.gresConf(), Optional.empty())).as("break %s", (int) br.charAt(0))
                        .hasSize(1);
                assertThat(g.gresConf().lines().filter(l -> l.contains("Type=evil")))
                        .allSatisfy(l -> assertThat(l).startsWith("#"));
            }
        }
    }

    @Test
    void sameBytesUnderTurkishLocaleAndOtherTimeZone() {
        String d =
                dev(0, ", name: AMD INSTINCT MI210, vendor: AMD") + dev(1, ", name: AMD INSTINCT MI210, vendor: AMD");
        String before;
        try (SimulatedGpuInventory inv = node(d, "links: [[0, 1, 1]]\n")) {
            before = gres(inv, TWO).gresConf() + gres(inv, TWO).nodeLine("n1");
        }
        Locale l = Locale.getDefault();
        TimeZone tz = TimeZone.getDefault();
        try {
            Locale.setDefault(Locale.forLanguageTag("tr-TR"));
            TimeZone.setDefault(TimeZone.getTimeZone("Pacific/Chatham"));
            try (SimulatedGpuInventory inv = node(d, "links: [[0, 1, 1]]\n")) {
                String after = gres(inv, TWO).gresConf() + gres(inv, TWO).nodeLine("n1");
                assertThat(after).isEqualTo(before);
                assertThat(after).contains("Type=mi210").doesNotContain("\u0131");
            }
        } finally {
            Locale.setDefault(l);
            TimeZone.setDefault(tz);
        }
    }

    @Test
    void coresOmittedOnEveryLineWhenOneGpuHasNoHostNumaNode() {
        // numa_node 5 is not one of the host's 2 NUMA nodes, device 1 has none at all
        String d = dev(0, ", numa_node: 0") + dev(1, "") + dev(2, ", numa_node: 5");
        try (SimulatedGpuInventory inv = node(d, null)) {
            SlurmGres g = gres(inv, TWO);
            assertThat(g.records()).allSatisfy(r -> assertThat(r.cores()).isEmpty());
            assertWellFormed(g, 3, 8);
        }
    }

    @Test
    void nodeLineRefusesNamesSlurmCannotRead() {
        try (GpuInventory inv = io.gpusched.core.GpuInventories.simulated("pcie-4xa10")) {
            SlurmGres g = gres(inv, CpuLayout.unknown());
            assertThat(g.nodeLine("node[1-2]")).isEqualTo("NodeName=node[1-2] Gres=gpu:a10:4");
            for (String bad : List.of("", "a b", "n1\nNodeName=evil", "n1 Gres=gpu:x:9", "n#1")) {
                assertThatThrownBy(() -> g.nodeLine(bad)).as("node name [%s]", bad)
                        .isInstanceOfAny(IllegalArgumentException.class, io.gpusched.core.GpuException.class)
                        .hasMessageContaining("node");
            }
        }
    }

    // ---- --check against hand-written drifted files (dgx1-v100, Cores off) ----

    static SlurmGres dgx() {
        try (GpuInventory inv = io.gpusched.core.GpuInventories.simulated("dgx1-v100")) {
            return gres(inv, CpuLayout.unknown());
        }
    }

    static List<String> check(SlurmGres g, String file, String nodeName) {
        return g.check(GresConfParser.parse(file, Optional.ofNullable(nodeName)));
    }

    @Test
    void crlfAndContinuationsOfTheGeneratedFileAreNotDrift() {
        SlurmGres g = dgx();
        String crlf = g.gresConf().replace("\n", "\r\n");
        assertThat(check(g, crlf, null)).isEmpty();
        String cont = g.gresConf().replace(" File=", " \\\n   File=");
        assertThat(check(g, cont, null)).isEmpty();
    }

    @Test
    void eachDriftKindIsItsOwnLine() {
        SlurmGres g = dgx();
        String good = g.gresConf();
        // wrong Type on nvidia3
        List<String> t = check(g, good.replace("Type=v100 File=/dev/nvidia3 ", "Type=a100 File=/dev/nvidia3 "), null);
        assertThat(t).hasSize(1);
        assertThat(t.get(0)).containsIgnoringCase("type").contains("nvidia3");
        // missing File nvidia5
        String missing = String.join("\n", good.lines().filter(x -> !x.contains("File=/dev/nvidia5 ")).toList()) + "\n";
        List<String> m = check(g, missing, null);
        assertThat(m).anySatisfy(x -> assertThat(x).containsIgnoringCase("missing").contains("/dev/nvidia5"));
        assertThat(m).allSatisfy(x -> assertThat(x).doesNotContain("nvidia0 ").doesNotContain("wrong Type"));
        // extra File nvidia9
        List<String> e = check(g, good + "Name=gpu Type=v100 File=/dev/nvidia9\n", null);
        assertThat(e).anySatisfy(x -> assertThat(x).containsIgnoringCase("extra").contains("/dev/nvidia9"));
        // wrong Links on one line only (symmetry broken): at least one line naming that device
        String badLinks =
                good.replace("File=/dev/nvidia0 Links=-1,1,1,2,2,0,0,0", "File=/dev/nvidia0 Links=-1,1,1,2,2,0,0,3");
        assertThat(badLinks).isNotEqualTo(good);
        List<String> l = check(g, badLinks, null);
        assertThat(l).isNotEmpty().allSatisfy(x -> assertThat(x).containsIgnoringCase("links"));
        assertThat(l).anySatisfy(x -> assertThat(x).contains("nvidia0").contains("nvidia7"));
    }

    @Test
    void wrongCoresAfterABiosChangeIsOneLine() {
        try (GpuInventory inv = io.gpusched.core.GpuInventories.simulated("dgx1-v100")) {
            SlurmGres g = gres(inv, CpuLayout.uniform(2, 20));
            String good = g.gresConf();
            String bad = good.replace("File=/dev/nvidia2 Cores=0-19 ", "File=/dev/nvidia2 Cores=20-39 ");
            assertThat(bad).isNotEqualTo(good);
            List<String> c = check(g, bad, null);
            assertThat(c).hasSize(1);
            assertThat(c.get(0)).containsIgnoringCase("cores").contains("nvidia2");
        }
    }

    @Test
    void duplicatedLineIsDrift() {
        SlurmGres g = dgx();
        String line = g.gresConf().lines().filter(x -> x.contains("File=/dev/nvidia4 ")).findFirst().orElseThrow();
        assertThat(check(g, g.gresConf() + line + "\n", null)).isNotEmpty();
    }

    /** The dgx1 file with its lines in {@code order}, Links rewritten (if {@code permuteLinks}) to the new order. */
    static String reordered(SlurmGres g, int[] order, boolean permuteLinks) {
        List<GresRecord> recs = g.records();
        StringBuilder b = new StringBuilder("AutoDetect=off\n");
        for (int pos = 0; pos < order.length; pos++) {
            GresRecord r = recs.get(order[pos]);
            List<Integer> l = r.links().orElseThrow();
            List<Integer> nl = new ArrayList<>();
            for (int k = 0; k < order.length; k++) {
                nl.add(permuteLinks ? l.get(order[k]) : l.get(k));
            }
            b.append("Name=gpu Type=").append(r.type().get()).append(" File=").append(r.files().get(0))
                    .append(" Links=").append(String.join(",", nl.stream().map(String::valueOf).toList()))
                    .append(" Flags=nvidia_gpu_env\n");
        }
        return b.toString();
    }

    @Test
    void gpuThatWentUnhealthyIsReportedExtraWithWhy() {
        try (SimulatedGpuInventory inv = io.gpusched.core.sim.NodeDescriptions.profile("pcie-4xa10")) {
            String before = gres(inv, CpuLayout.unknown()).gresConf();
            inv.setHealth(2, GpuHealth.unhealthy("XID 79 fell off the bus"));
            SlurmGres after = gres(inv, CpuLayout.unknown());
            List<String> drift = check(after, before, null);
            assertThat(drift).anySatisfy(x -> assertThat(x).containsIgnoringCase("extra").contains("/dev/nvidia2")
                    .containsIgnoringCase("unhealthy"));
            assertThat(drift).noneSatisfy(x -> assertThat(x).contains("/dev/nvidia0"));
            assertThat(after.gresValue()).isEqualTo("gpu:a10:3");
        }
    }

    @Test
    void linksAreReadInTheFilesOwnOrder() {
        SlurmGres g = dgx();
        int[] order = {1, 0, 2, 3, 4, 5, 7, 6};
        assertThat(check(g, reordered(g, order, true), null)).as("same links, other line order").isEmpty();
        List<String> wrong = check(g, reordered(g, order, false), null);
        assertThat(wrong).as("links not moved with their lines").isNotEmpty()
                .allSatisfy(x -> assertThat(x).containsIgnoringCase("links"));
    }

    @Test
    void rangeFileEquivalentIsNotDriftAndCountMismatchIs() {
        try (GpuInventory inv = io.gpusched.core.GpuInventories.simulated("pcie-4xa10")) {
            SlurmGres g = gres(inv, CpuLayout.unknown());
            assertThat(check(g, "AutoDetect=off\nName=gpu Type=a10 File=/dev/nvidia[0-3] Flags=nvidia_gpu_env\n", null))
                    .isEmpty();
            List<String> r =
                    check(g, "AutoDetect=off\nName=gpu Type=a10 File=/dev/nvidia[0-2,5] Flags=nvidia_gpu_env\n",
                            null);
            assertThat(r).anySatisfy(x -> assertThat(x).containsIgnoringCase("missing").contains("/dev/nvidia3"));
            assertThat(r).anySatisfy(x -> assertThat(x).containsIgnoringCase("extra").contains("/dev/nvidia5"));
            List<String> cnt = check(g,
                    "Name=gpu Type=a10 File=/dev/nvidia[0-3] Count=3 Flags=nvidia_gpu_env\n", null);
            assertThat(cnt).anySatisfy(x -> assertThat(x).containsIgnoringCase("count"));
        }
    }

    @Test
    void nodeNameFilterKeepsOnlyThisNodesLines() {
        try (GpuInventory inv = io.gpusched.core.GpuInventories.simulated("pcie-4xa10")) {
            SlurmGres g = gres(inv, CpuLayout.unknown());
            String f = "NodeName=other Name=gpu Type=h100 File=/dev/nvidia[0-7]\n"
                    + "NodeName=node[1-3] Name=gpu Type=a10 File=/dev/nvidia[0-3] Flags=nvidia_gpu_env\n";
            assertThat(check(g, f, "node2")).isEmpty();
            assertThat(check(g, f, "other")).isNotEmpty();
        }
    }

    @Test
    void hostileFilesAreTypedErrors() {
        SlurmGres g = dgx();
        StringBuilder huge = new StringBuilder();
        while (huge.length() < (5 << 20)) {
            huge.append("# padding padding padding padding padding padding padding padding\n");
        }
        assertThatThrownBy(() -> check(g, huge.toString(), null)).isInstanceOf(GresConfException.class);
        assertThatThrownBy(() -> check(g, "Name=gpu File=/dev/nvidia0 \u0000\u0001\u00ff Type=v100\n", null))
                .isInstanceOf(GresConfException.class).hasMessageContaining("1");
        assertThatThrownBy(() -> check(g, "Name=gpu File=/dev/nvidia[3-1]\n", null))
                .isInstanceOf(GresConfException.class);
        assertThatThrownBy(() -> check(g, "Name=gpu File=/dev/nvidia[0-99999999]\n", null))
                .isInstanceOf(GresConfException.class);
        assertThatThrownBy(() -> check(g, "Name=gpu Links=-1,x File=/dev/nvidia0\n", null))
                .isInstanceOf(GresConfException.class);
    }
}
