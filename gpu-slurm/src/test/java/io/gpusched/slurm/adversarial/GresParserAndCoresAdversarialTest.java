package io.gpusched.slurm.adversarial;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.sim.NodeDescriptions;
import io.gpusched.slurm.CpuLayout;
import io.gpusched.slurm.GresConfException;
import io.gpusched.slurm.GresConfParser;
import io.gpusched.slurm.GresRecord;
import io.gpusched.slurm.SlurmGres;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import java.util.SortedSet;
import java.util.TreeSet;
import org.junit.jupiter.api.Disabled;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** Adversarial review of issue 26: Cores= numbering from a fake sysfs, and gres.conf syntax gpusched must read. */
@Tag("adversarial")
class GresParserAndCoresAdversarialTest {
    @TempDir
    Path tmp;

    /** A CPU of a fake sysfs: its package, core id and NUMA node. */
    void cpu(Path sys, int cpu, int pkg, int core) throws Exception {
        Path t = Files.createDirectories(sys.resolve("devices/system/cpu/cpu" + cpu + "/topology"));
        Files.writeString(t.resolve("physical_package_id"), pkg + "\n");
        Files.writeString(t.resolve("core_id"), core + "\n");
        Files.writeString(sys.resolve("devices/system/cpu/cpu" + cpu + "/online"), "1\n");
    }

    void numa(Path sys, int node, String cpulist) throws Exception {
        Path n = Files.createDirectories(sys.resolve("devices/system/node/node" + node));
        Files.writeString(n.resolve("cpulist"), cpulist + "\n");
    }

    static SortedSet<Integer> range(int from, int to) {
        SortedSet<Integer> s = new TreeSet<>();
        for (int i = from; i <= to; i++) {
            s.add(i);
        }
        return s;
    }

    @Test
    void hyperthreadsAndGappedCoreIdsNumberedSocketBySocket() throws Exception {
        Path sys = tmp.resolve("sys");
        // 2 sockets x 4 cores (core ids 0,1,8,9 as on Intel parts with gaps) x 2 threads; cpus 0-7 first threads
        int[] ids = {0, 1, 8, 9};
        for (int t = 0; t < 2; t++) {
            for (int p = 0; p < 2; p++) {
                for (int c = 0; c < 4; c++) {
                    cpu(sys, t * 8 + p * 4 + c, p, ids[c]);
                }
            }
        }
        Files.writeString(sys.resolve("devices/system/cpu/online"), "0-15\n");
        numa(sys, 0, "0-3,8-11");
        numa(sys, 1, "4-7,12-15");
        CpuLayout l = CpuLayout.fromSysfs(sys);
        assertThat(l.coreCount()).isEqualTo(8);
        assertThat(l.cores(0)).contains(range(0, 3));
        assertThat(l.cores(1)).contains(range(4, 7));
    }

    @Test
    void subNumaClusteringSplitsASocket() throws Exception {
        Path sys = tmp.resolve("sys");
        // 1 socket, 4 cores, SNC-2: NUMA 0 has cores 0,1 and NUMA 1 cores 2,3; the second socket's package id is 3
        for (int c = 0; c < 4; c++) {
            cpu(sys, c, 0, c);
        }
        for (int c = 0; c < 2; c++) {
            cpu(sys, 4 + c, 3, c);
        }
        Files.writeString(sys.resolve("devices/system/cpu/online"), "0-5\n");
        numa(sys, 0, "0-1");
        numa(sys, 1, "2-3");
        numa(sys, 2, "4-5");
        CpuLayout l = CpuLayout.fromSysfs(sys);
        assertThat(l.coreCount()).isEqualTo(6);
        assertThat(l.cores(0)).contains(range(0, 1));
        assertThat(l.cores(1)).contains(range(2, 3));
        assertThat(l.cores(2)).contains(range(4, 5));
    }

    @Test
    void brokenSysfsIsUnknownNotAnException() throws Exception {
        Path sys = tmp.resolve("sys");
        cpu(sys, 0, 0, 0);
        Files.writeString(sys.resolve("devices/system/cpu/cpu0/topology/core_id"), "garbage\n");
        Files.writeString(sys.resolve("devices/system/cpu/online"), "0\n");
        numa(sys, 0, "0-x");
        CpuLayout l = CpuLayout.fromSysfs(sys);
        assertThat(l.coresByNuma()).isEmpty();
        assertThat(CpuLayout.fromSysfs(tmp.resolve("absent")).coresByNuma()).isEmpty();
    }

    @Test
    @Timeout(20)
    void hugeRangesAreRefusedNotExpanded() {
        assertThatThrownBy(() -> GresRecord.parseIntList("0-2147483646")).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> GresConfParser.parse("Name=gpu File=/dev/nvidia0 Cores=0-2147483646\n",
                Optional.empty())).isInstanceOf(GresConfException.class);
    }

    @Test
    void intListsAreStrict() {
        for (String bad : List.of("3-1", "1,,2", "-1", "1-", "a", "1 2", "01-3x")) {
            assertThatThrownBy(() -> GresRecord.parseIntList(bad)).as(bad).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining(bad);
        }
        assertThat(GresRecord.parseIntList("0-3,8,10-11")).containsExactly(0, 1, 2, 3, 8, 10, 11);
        assertThat(GresRecord.formatIntList(new TreeSet<>(List.of(0, 1, 2, 3, 8, 10, 11)))).isEqualTo("0-3,8,10-11");
    }

    static SlurmGres a10() {
        try (GpuInventory inv = GpuInventories.simulated("pcie-4xa10")) {
            return SlurmGres.of(inv,
                    new SlurmGres.Options(Path.of("/dev"), Path.of("/nonexistent"), CpuLayout.unknown()));
        }
    }

    @Test
    void slurmSyntaxVariantsOfTheSameNodeAreNotDrift() {
        SlurmGres g = a10();
        List<String> same = List.of(
                "Name=gpu Type=a10 File=/dev/nvidia0,/dev/nvidia1,/dev/nvidia2,/dev/nvidia3 Flags=nvidia_gpu_env\n",
                "NAME=gpu TYPE=a10 FILE=/dev/nvidia[0-3] FLAGS=nvidia_gpu_env\n",
                "Name=gpu Type=a10 File=/dev/nvidia[0-1] Flags=nvidia_gpu_env # first two\n"
                        + "   Name=gpu\tType=a10\tFile=/dev/nvidia[2-3] Flags=nvidia_gpu_env\n",
                "Name=gpu Type=a10 File=/dev/nvidia[0-3] \\\r\n Flags=nvidia_gpu_env\r\n",
                "Name=mps Count=400\nName=gpu Type=a10 File=/dev/nvidia[0-3] Flags=nvidia_gpu_env\n",
                "Name=gpu Type=a10 File=/dev/nvidia[0-3] Flags=nvidia_gpu_env\nInclude /dev/null\n".replace(
                        "Include /dev/null\n", ""));
        for (String f : same) {
            assertThat(g.check(GresConfParser.parse(f, Optional.of("n1")))).as(f).isEmpty();
        }
    }

    @Test
    void bomAndBinaryAndUnknownKeysAreTypedErrorsNamingTheLine() {
        assertThatThrownBy(() -> GresConfParser.parse("# ok\nName=gpu Fil=/dev/nvidia0\n", Optional.empty()))
                .isInstanceOf(GresConfException.class).hasMessageContaining("Fil")
                .satisfies(e -> assertThat(((GresConfException) e).line()).isEqualTo(2));
        assertThatThrownBy(() -> GresConfParser.parse("Name=gpu File=/dev/nvidia[0-\n", Optional.empty()))
                .isInstanceOf(GresConfException.class);
        assertThatThrownBy(() -> GresConfParser.parse("Name=gpu File=\n", Optional.empty()))
                .isInstanceOf(GresConfException.class);
    }

    @Test
    void continuationBackslashAtEndOfFileIsNotSilentlyDropped() {
        // Slurm's own parser reads the joined line at EOF; gpusched must read it too, or refuse the file
        String f = "Name=gpu Type=a10 File=/dev/nvidia[0-2] Flags=nvidia_gpu_env\n"
                + "Name=gpu Type=a10 File=/dev/nvidia3 Flags=nvidia_gpu_env \\";
        List<GresRecord> r;
        try {
            r = GresConfParser.parse(f, Optional.empty());
        } catch (GresConfException refused) {
            assertThat(refused.line()).isEqualTo(2);
            return;
        }
        assertThat(r).hasSize(2);
        assertThat(a10().check(r)).isEmpty();
    }

    @Test
    void migNextToAFullGpuRoundTripsAndKeepsLinksAllOrNone() {
        String y = "node: mixmig\ndescription: x\ndefaults: {vendor: NVIDIA, compute_capability: \"8.0\"}\ndevices:\n"
                + "  - {index: 0, name: NVIDIA A100-SXM4-40GB, memory: 40GiB, pci_bus_id: \"00000000:10:00.0\", minor: 0}\n"
                + "  - {index: 1, name: NVIDIA A100-SXM4-40GB MIG 3g.20gb, memory: 20GiB, pci_bus_id: \"00000000:11:00.0\","
                + " minor: 1, parent: GPU-11111111-0000-0000-0000-000000000000,"
                + " properties: {nvml.index: \"1\", mig.gpu_instance_id: \"1\", mig.compute_instance_id: \"0\"}}\n"
                + "  - {index: 2, name: NVIDIA A100-SXM4-40GB, memory: 40GiB, pci_bus_id: \"00000000:12:00.0\", minor: 2}\n"
                + "links: [[0, 2, 12]]\n";
        Path proc = Path.of("src/test/resources/captures/proc-nvidia").toAbsolutePath();
        try (GpuInventory inv = NodeDescriptions.parse(y, "mixmig.yaml")) {
            SlurmGres g = SlurmGres.of(inv, new SlurmGres.Options(Path.of("/dev"), proc, CpuLayout.unknown()));
            List<GresRecord> recs = GresConfParser.parse(g.gresConf(), Optional.empty());
            assertThat(g.check(recs)).isEmpty();
            long withLinks = recs.stream().filter(r -> r.links().isPresent()).count();
            assertThat(withLinks).as("Links on all lines or none:\n" + g.gresConf()).isIn(0L, (long) recs.size());
            List<String> files = recs.stream().flatMap(r -> r.files().stream()).toList();
            assertThat(files).doesNotHaveDuplicates();
        }
    }
}
