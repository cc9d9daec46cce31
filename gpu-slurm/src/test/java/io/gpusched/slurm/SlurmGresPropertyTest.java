package io.gpusched.slurm;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.ComputeCapability;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.Set;
import java.util.SortedSet;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;

/**
 * Random nodes (1-16 GPUs, random bus order, NUMA nodes, links and health): every healthy device appears exactly once,
 * no unhealthy one does (each named in a comment), Links are symmetric with -1 on the diagonal and equal the
 * topology, Cores are within the node and are the GPU's NUMA node's cores, the output checks clean against itself,
 * and removing any one line is reported as that File missing.
 */
class SlurmGresPropertyTest {

    record Node(List<GpuDevice> devices, GpuTopology topology, Map<Integer, GpuHealth> health) {
    }

    static Node node(long seed, int n) {
        Random r = new Random(seed);
        List<GpuDevice> devices = new ArrayList<>();
        List<Integer> bus = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            bus.add(i * 3 + 1);
        }
        java.util.Collections.shuffle(bus, r);
        for (int i = 0; i < n; i++) {
            devices.add(GpuDevice.builder().index(i).uuid("GPU-" + seed + "-" + i).vendor(GpuVendor.NVIDIA)
                    .name(r.nextBoolean() ? "NVIDIA A100-SXM4-80GB" : "NVIDIA H100 80GB HBM3")
                    .memory(MemorySize.ofMebibytes(81920)).computeCapability(ComputeCapability.parse("8.0"))
                    .pciBusId(String.format("00000000:%02X:00.0", bus.get(i))).numaNode(r.nextInt(2))
                    .minor(i).build());
        }
        GpuTopology.Builder t = GpuTopology.builder(devices);
        for (int a = 0; a < n; a++) {
            for (int b = a + 1; b < n; b++) {
                if (r.nextInt(3) == 0) {
                    t.links(a, b, 1 + r.nextInt(12));
                }
            }
        }
        Map<Integer, GpuHealth> health = new HashMap<>();
        for (int i = 0; i < n; i++) {
            int h = r.nextInt(8);
            health.put(i, h == 0 ? GpuHealth.unhealthy("XID 79") : h == 1 ? GpuHealth.lost("fell off the bus")
                    : GpuHealth.HEALTHY);
        }
        return new Node(devices, t.build(), health);
    }

    @Property(tries = 200)
    void gresConfIsFaithful(@ForAll long seed, @ForAll @IntRange(min = 1, max = 16) int n) {
        Node node = node(seed, n);
        CpuLayout cpus = CpuLayout.uniform(2, 8);
        SlurmGres g = SlurmGres.of("test", node.devices(), node.topology(), d -> node.health().get(d.index()),
                new SlurmGres.Options(Path.of("/dev"), Path.of("/nonexistent-proc"), cpus));
        String text = g.gresConf();
        List<GresRecord> read = GresConfParser.parse(text, Optional.empty());
        // every healthy device exactly once, no other
        List<String> files = read.stream().flatMap(x -> x.files().stream()).toList();
        for (GpuDevice d : node.devices()) {
            String f = "/dev/nvidia" + d.minor().getAsInt();
            boolean healthy = node.health().get(d.index()).state() == GpuHealth.State.HEALTHY;
            assertThat(files.stream().filter(f::equals).count()).as(f).isEqualTo(healthy ? 1 : 0);
            if (!healthy) {
                assertThat(text).contains("# GPU " + d.index() + " (" + d.uuid() + ", " + f + ") left out: ");
            }
        }
        // records in PCI bus order
        List<GpuDevice> byFile = new ArrayList<>();
        for (GresRecord x : read) {
            byFile.add(node.devices().get(Integer.parseInt(x.files().get(0).substring("/dev/nvidia".length()))));
        }
        for (int i = 1; i < byFile.size(); i++) {
            assertThat(byFile.get(i - 1).pciBusId().compareTo(byFile.get(i).pciBusId())).isNegative();
        }
        // Links symmetric, -1 on the diagonal, equal to the topology; Cores the NUMA node's, within the node
        for (int i = 0; i < read.size(); i++) {
            GresRecord x = read.get(i);
            if (x.links().isPresent()) {
                assertThat(x.links().get()).hasSize(read.size());
                for (int j = 0; j < read.size(); j++) {
                    int l = x.links().get().get(j);
                    assertThat(l).isEqualTo(read.get(j).links().orElseThrow().get(i));
                    assertThat(l).isEqualTo(i == j ? -1
                            : node.topology().linkCount(byFile.get(i).index(), byFile.get(j).index()));
                }
            }
            SortedSet<Integer> c = x.cores().orElseThrow();
            assertThat(c).isEqualTo(cpus.cores(byFile.get(i).numaNode().getAsInt()).orElseThrow());
            assertThat(c.first()).isGreaterThanOrEqualTo(0);
            assertThat(c.last()).isLessThan(cpus.coreCount());
            assertThat(x.type()).contains(byFile.get(i).name().contains("A100") ? "a100" : "h100");
        }
        assertThat(read.stream().anyMatch(x -> x.links().isPresent())).isEqualTo(read.size() > 1
                && hasLink(node.topology(), byFile));
        // clean against itself; one line removed is that File missing
        assertThat(g.check(read)).isEmpty();
        if (!read.isEmpty()) {
            int drop = new Random(seed).nextInt(read.size());
            List<GresRecord> less = new ArrayList<>(read);
            GresRecord gone = less.remove(drop);
            List<String> drift = g.check(less);
            assertThat(drift).anySatisfy(x -> assertThat(x).startsWith("missing File=" + gone.files().get(0) + ":"));
            assertThat(drift).anySatisfy(x -> assertThat(x).startsWith("wrong count"));
        }
        // same node, same bytes
        assertThat(SlurmGres.of("test", node.devices(), node.topology(), d -> node.health().get(d.index()),
                new SlurmGres.Options(Path.of("/dev"), Path.of("/nonexistent-proc"), cpus)).gresConf()).isEqualTo(text);
        // Gres= counts what is written, per type
        int total = 0;
        for (String part : g.gresValue().isEmpty() ? new String[0] : g.gresValue().split(",")) {
            assertThat(Set.of("a100", "h100")).contains(part.split(":")[1]);
            total += Integer.parseInt(part.split(":")[2]);
        }
        assertThat(total).isEqualTo(read.size());
    }

    private static boolean hasLink(GpuTopology t, List<GpuDevice> d) {
        for (int i = 0; i < d.size(); i++) {
            for (int j = i + 1; j < d.size(); j++) {
                if (t.linkCount(d.get(i).index(), d.get(j).index()) > 0) {
                    return true;
                }
            }
        }
        return false;
    }
}
