package io.gpusched.rocm;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationStrategies;
import io.gpusched.core.BackendUnavailableException;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.MemorySize;
import io.gpusched.core.PcieLevel;
import io.gpusched.core.strategy.PairScore;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class KfdSysfsInventoryTest {
    static final Clock CLOCK = Clock.systemUTC();

    @Test
    void mi210HivesInPciOrderWithXgmiLinks(@TempDir Path sys) throws Exception {
        KfdSysfsInventory inv = KfdSysfsInventory.open(KfdFixtures.mi210(sys), CLOCK);
        List<GpuDevice> d = inv.devices();
        assertThat(d).extracting(GpuDevice::pciBusId).containsExactly("0000:03:00.0", "0000:26:00.0", "0000:43:00.0",
                "0000:63:00.0", "0000:83:00.0", "0000:a3:00.0", "0000:c3:00.0", "0000:e3:00.0");
        assertThat(d).extracting(x -> x.properties().get("kfd.node"))
                .containsExactly("4", "5", "3", "2", "8", "9", "7", "6");
        assertThat(d.get(0).minor()).hasValue(130);
        assertThat(d.get(0).uuid()).isEqualTo("GPU-93bb3629c01aea1c");
        assertThat(d.get(0).name()).isEqualTo("AMD Instinct MI210");
        assertThat(d.get(0).architecture()).contains("gfx90a");
        assertThat(d.get(0).memory()).isEqualTo(MemorySize.ofGibibytes(64));
        assertThat(d.get(0).numaNode()).as("from the PCIe io_link to CPU node 0").hasValue(0);
        assertThat(d.get(5).numaNode()).hasValue(1);
        GpuTopology t = inv.topology();
        for (int a = 0; a < 8; a++) {
            for (int b = 0; b < 8; b++) {
                assertThat(t.linkCount(a, b)).as("%d-%d", a, b).isEqualTo(a != b && a / 4 == b / 4 ? 1 : 0);
            }
        }
        assertThat(t.pcieLevel(0, 1)).isEqualTo(PcieLevel.NODE);
        assertThat(t.pcieLevel(0, 4)).isEqualTo(PcieLevel.SYSTEM);
        assertThat(inv.problems()).isEmpty();
    }

    @Test
    void cpxPartitionsAreChildrenOfTheirPhysicalGpu(@TempDir Path sys) throws Exception {
        KfdSysfsInventory inv = KfdSysfsInventory.open(KfdFixtures.cpx(sys), CLOCK);
        List<GpuDevice> d = inv.devices();
        assertThat(d).hasSize(8).allSatisfy(x -> assertThat(x.isPartition()).isTrue());
        assertThat(d.stream().map(GpuDevice::uuid).collect(Collectors.toSet())).hasSize(8);
        Set<String> parents = d.stream().map(x -> x.parentUuid().get()).collect(Collectors.toSet());
        assertThat(parents).hasSize(2);
        assertThat(d.get(1).properties()).containsEntry("partition_index", "1").containsEntry("partitions", "4");
        assertThat(d.get(1).name()).isEqualTo("AMD Instinct MI210 (partition 1)");
        assertThat(d.get(1).architecture()).contains("gfx942");
        assertThat(d.get(1).minor()).hasValue(129);
        assertThat(d.get(4).minor()).hasValue(136);
        assertThat(inv.topology().pcieLevel(0, 3)).isEqualTo(PcieLevel.INTERNAL);
        assertThat(inv.topology().linkCount(0, 4)).isEqualTo(1);
        assertThat(inv.topology().linkCount(0, 3)).as("no XGMI io_link inside the package in this tree, yet never"
                + " fewer links than to another package").isEqualTo(1);
    }

    @Test
    void outOfRangeValuesSkipTheNodeOrTheFieldNotTheBackend(@TempDir Path sys) throws Exception {
        KfdFixtures.mi210(sys);
        replace(sys, 2, "drm_render_minor 128", "drm_render_minor 4294967295");
        replace(sys, 3, "drm_render_minor 129", "drm_render_minor 2147483648");
        replace(sys, 4, "location_id 768", "location_id 18446744073709551615");
        replace(sys, 5, "local_mem_size 0", "local_mem_size 18446744073709551615");
        deleteTree(KfdFixtures.nodes(sys).resolve("5/mem_banks"));
        replace(sys, 6, "domain 0", "domain 99999999999");
        KfdSysfsInventory inv = KfdSysfsInventory.open(sys, CLOCK);
        assertThat(inv.devices()).extracting(x -> x.properties().get("kfd.node"))
                .containsExactlyInAnyOrder("5", "7", "8", "9");
        assertThat(inv.problems())
                .anySatisfy(p -> assertThat(p).contains("node 2").contains("drm_render_minor 4294967295")
                        .contains("out of range").contains("skipped"))
                .anySatisfy(p -> assertThat(p).contains("node 3").contains("drm_render_minor 2147483648"))
                .anySatisfy(p -> assertThat(p).contains("node 4").contains("location_id 18446744073709551615"))
                .anySatisfy(p -> assertThat(p).contains("node 6").contains("domain 99999999999"))
                .anySatisfy(p -> assertThat(p).contains("node 5").contains("memory size unknown")
                        .contains("local_mem_size 18446744073709551615"));
        GpuDevice five = inv.devices().stream().filter(x -> x.properties().get("kfd.node").equals("5")).findFirst()
                .orElseThrow();
        assertThat(five.memoryKnown()).isFalse();
        assertThat(five.memory()).isEqualTo(MemorySize.ZERO);
        assertThat(inv.devices()).filteredOn(x -> x != five).allSatisfy(x -> assertThat(x.memoryKnown()).isTrue());
        assertThat(new KfdSysfsInventoryProvider(sys).unavailabilityCause()).isEmpty();
    }

    @Test
    void aGpuWithoutAnyMemorySizeIsUnknownNotZero(@TempDir Path sys) throws Exception {
        Path n = Files.createDirectories(KfdFixtures.nodes(sys).resolve("1"));
        Files.writeString(n.resolve("properties"), "simd_count 256\ndevice_id 26720\nlocation_id 6400\n"
                + "drm_render_minor 128\n");
        KfdSysfsInventory inv = KfdSysfsInventory.open(sys, CLOCK);
        assertThat(inv.devices().get(0).memoryKnown()).isFalse();
        assertThat(inv.problems()).singleElement().satisfies(p -> assertThat(p).contains("node 1")
                .contains("no mem_banks/0 size_in_bytes and no local_mem_size"));
        Files.writeString(n.resolve("properties"), "simd_count 256\nlocation_id 6400\ndrm_render_minor 128\n"
                + "local_mem_size 0\n");
        assertThat(KfdSysfsInventory.open(sys, CLOCK).devices().get(0).memoryKnown()).as("0 B is not a size").isFalse();
    }

    @Test
    void anEmptyPropertiesFileOfAGpuNodeIsReported(@TempDir Path sys) throws Exception {
        KfdFixtures.mi210(sys);
        Files.writeString(KfdFixtures.nodes(sys).resolve("3/properties"), "");
        KfdSysfsInventory inv = KfdSysfsInventory.open(sys, CLOCK);
        assertThat(inv.devices()).hasSize(7);
        assertThat(inv.problems())
                .anySatisfy(p -> assertThat(p).contains("3/properties: empty although gpu_id is 1003"));
        Files.writeString(KfdFixtures.nodes(sys).resolve("3/properties"), "not a property\n");
        assertThat(KfdSysfsInventory.open(sys, CLOCK).problems())
                .anySatisfy(p -> assertThat(p).contains("3/properties: no readable property"));
    }

    @Test
    void oneBadNodeLeavesTheProviderAvailable(@TempDir Path sys) throws Exception {
        KfdFixtures.mi210(sys);
        for (int node = 2; node <= 8; node++) {
            replace(sys, node, "drm_render_minor " + (128 + node - 2), "drm_render_minor 4294967295");
        }
        assertThat(new KfdSysfsInventoryProvider(sys).unavailabilityCause()).isEmpty();
        replace(sys, 9, "drm_render_minor 135", "drm_render_minor 2147483648");
        assertThat(new KfdSysfsInventoryProvider(sys).unavailabilityCause()).hasValueSatisfying(c -> assertThat(c)
                .contains("no usable GPU node").contains("out of range").doesNotContain("\n"));
    }

    static void replace(Path sys, int node, String from, String to) throws Exception {
        Path p = KfdFixtures.nodes(sys).resolve(node + "/properties");
        String s = Files.readString(p);
        assertThat(s).as("fixture of node %d holds %s", node, from).contains(from + "\n");
        Files.writeString(p, s.replace(from + "\n", to + "\n"));
    }

    static void deleteTree(Path p) throws Exception {
        try (var s = Files.walk(p)) {
            for (Path x : s.sorted(java.util.Comparator.reverseOrder()).toList()) {
                Files.delete(x);
            }
        }
    }

    @Test
    void malformedValuesAreReportedNotFatal(@TempDir Path sys) throws Exception {
        KfdFixtures.mi210(sys);
        Path n2 = KfdFixtures.nodes(sys).resolve("2/properties");
        Files.writeString(n2, Files.readString(n2) + "garbage line here\nsimd_per_cu -4\nhuge 99999999999999999999\n");
        Files.delete(KfdFixtures.nodes(sys).resolve("9/properties"));
        Files.createDirectories(KfdFixtures.nodes(sys).resolve("not-a-node"));
        KfdSysfsInventory inv = KfdSysfsInventory.open(sys, CLOCK);
        assertThat(inv.devices()).hasSize(7);
        assertThat(inv.problems()).anySatisfy(p -> assertThat(p).contains("malformed line \"garbage line here\""))
                .anySatisfy(p -> assertThat(p).contains("simd_per_cu -4"))
                .anySatisfy(p -> assertThat(p).contains("out of range"))
                .anySatisfy(p -> assertThat(p).contains("9/properties: missing"));
        assertThat(KfdSanity.problem(sys)).as("librocm_smi 5.2.3 answers garbage lines and a missing file").isEmpty();
        deleteTree(KfdFixtures.nodes(sys).resolve("4/io_links"));
        assertThat(KfdSanity.problem(sys)).hasValueSatisfying(p -> assertThat(p).contains("KFD node 4 has no io_links")
                .contains("SIGABRT"));
        Files.createDirectories(KfdFixtures.nodes(sys).resolve("4/io_links/0"));
        Files.writeString(KfdFixtures.nodes(sys).resolve("4/io_links/0/properties"), " \n\t\n");
        assertThat(KfdSanity.problem(sys)).hasValueSatisfying(p -> assertThat(p).contains("4/io_links/0/properties")
                .contains("only blank lines"));
    }

    @Test
    void twoNodesClaimingOneRenderNodeKeepTheFirst(@TempDir Path sys) throws Exception {
        KfdFixtures.gpu(sys, 1, 0x1900, 128, "1", "0", 90000, 16L << 30);
        KfdFixtures.gpu(sys, 2, 0x1A00, 128, "2", "0", 90000, 16L << 30);
        KfdSysfsInventory inv = KfdSysfsInventory.open(sys, CLOCK);
        assertThat(inv.devices()).hasSize(1);
        assertThat(inv.problems()).anySatisfy(p -> assertThat(p).contains("both claim renderD128"));
    }

    @Test
    void oldKernelFormat(@TempDir Path sys) throws Exception {
        Path n = Files.createDirectories(KfdFixtures.nodes(sys).resolve("1"));
        Files.writeString(n.resolve("properties"), "simd_count 256\ndevice_id 26720\nlocation_id 6400\n"
                + "drm_render_minor 128\nlocal_mem_size 17163091968\n");
        GpuDevice d = KfdSysfsInventory.open(sys, CLOCK).devices().get(0);
        assertThat(d.name()).isEqualTo("Radeon Instinct MI25");
        assertThat(d.architecture()).isEmpty();
        assertThat(d.memory()).isEqualTo(MemorySize.ofBytes(17163091968L));
        assertThat(d.uuid()).isEqualTo("AMD-0000:19:00.0");
    }

    @Test
    void metricsFromDrm(@TempDir Path sys) throws Exception {
        KfdFixtures.mi210(sys);
        KfdFixtures.drm(sys, 130, "37", "1073741824", true, "95000000");
        KfdFixtures.drm(sys, 131, "garbage", null, false, null);
        KfdSysfsInventory inv = KfdSysfsInventory.open(sys, CLOCK);
        GpuMetrics m0 = inv.sample().forDevice(0).orElseThrow();
        assertThat(m0.utilizationPercent()).hasValue(37);
        assertThat(m0.memoryUsed()).contains(MemorySize.ofGibibytes(1));
        assertThat(m0.temperatureCelsius()).as("edge preferred").hasValue(52);
        assertThat(m0.powerWatts()).hasValue(95);
        GpuMetrics m1 = inv.sample().forDevice(1).orElseThrow();
        assertThat(m1.utilizationPercent()).isEmpty();
        assertThat(m1.temperatureCelsius()).as("junction when no edge").hasValue(71);
        assertThat(inv.sample().forDevice(2).orElseThrow().temperatureCelsius()).isEmpty();
    }

    @Test
    void providerSaysWhyItIsUnavailable(@TempDir Path sys) throws Exception {
        KfdSysfsInventoryProvider p = new KfdSysfsInventoryProvider(sys);
        assertThat(p.unavailabilityCause()).hasValueSatisfying(c -> assertThat(c).contains("amdgpu not loaded"));
        KfdFixtures.cpu(sys, 0);
        assertThat(p.unavailabilityCause()).contains("the KFD topology lists no GPU node (simd_count > 0)");
        assertThatThrownBy(() -> p.open(null)).isInstanceOf(BackendUnavailableException.class);
        KfdFixtures.mi210(sys.resolve("full"));
        assertThat(new KfdSysfsInventoryProvider(sys.resolve("full")).open(null).devices()).hasSize(8);
    }

    @Test
    void gfxTargets() {
        assertThat(KfdTopology.gfxTarget(90010)).isEqualTo("gfx90a");
        assertThat(KfdTopology.gfxTarget(90402)).isEqualTo("gfx942");
        assertThat(KfdTopology.gfxTarget(110000)).isEqualTo("gfx1100");
        assertThat(KfdTopology.gfxTarget(100300)).isEqualTo("gfx1030");
    }

    /** @return the captured KFD trees copied into this module (see its INDEX.txt) */
    static Path captures() {
        assertThat(KfdFixtures.CAPTURES).as("the captures copied into the module").isDirectory();
        return KfdFixtures.CAPTURES;
    }

    /** unique_id of a KFD node, read straight from the capture (an independent view of the packages). */
    static String packageOf(Path nodes, String node) throws Exception {
        return Files.readAllLines(nodes.resolve(node + "/properties")).stream().filter(l -> l.startsWith("unique_id "))
                .findFirst().orElseThrow();
    }

    @ParameterizedTest
    @CsvSource({"topology-parsing-mi308/topology/nodes, 4", "topo-mi300-cpx/topology/nodes, 8",
        "own:mi300x-cpx-2x4/nodes, 4"})
    void cpxPartitionsOfOnePackageAreEachOthersClosestPeers(String capture, int perPackage) throws Exception {
        Path nodes = capture.startsWith("own:") ? Path.of("src/test/resources/kfd", capture.substring(4))
                : captures().resolve(capture);
        KfdSysfsInventory inv = KfdSysfsInventory.from(KfdTopology.readNodes(nodes), nodes, CLOCK);
        if (capture.startsWith("own:")) {
            assertThat(inv.topology().linkCount(0, 1)).isEqualTo(3);
            assertThat(inv.topology().linkCount(0, 4)).isEqualTo(1);
            assertThat(inv.problems()).isEmpty();
        }
        GpuTopology t = inv.topology();
        for (GpuDevice a : inv.devices()) {
            int closestSame = Integer.MAX_VALUE;
            int bestOther = 0;
            for (GpuDevice b : inv.devices()) {
                if (a == b) {
                    continue;
                }
                int score = PairScore.of(t, a.index(), b.index());
                if (packageOf(nodes, a.properties().get("kfd.node"))
                        .equals(packageOf(nodes, b.properties().get("kfd.node")))) {
                    closestSame = Math.min(closestSame, score);
                } else {
                    bestOther = Math.max(bestOther, score);
                }
            }
            assertThat(closestSame).as("device %s: its farthest sibling beats any other package", a.index())
                    .isGreaterThan(bestOther);
        }
        for (int count : new int[]{2, 4, perPackage}) {
            try (GpuScheduler s = GpuScheduler.builder().inventory(inv).strategy(AllocationStrategies.topologyAware())
                    .build()) {
                for (int job = 0; job < Math.min(3, inv.devices().size() / count); job++) {
                    Allocation a = s.allocate(GpuRequest.builder().count(count).build());
                    Set<String> packages = new java.util.HashSet<>();
                    for (GpuDevice d : a.devices()) {
                        packages.add(packageOf(nodes, d.properties().get("kfd.node")));
                    }
                    assertThat(packages).as("job %d of %d partitions on %s: %s", job, count, capture,
                            a.deviceIndices()).hasSize(1);
                }
            }
        }
    }

    @Test
    void mi308WeightsBecomeLinkRanks() throws Exception {
        Path nodes = captures().resolve("topology-parsing-mi308/topology/nodes");
        KfdSysfsInventory inv = KfdSysfsInventory.from(KfdTopology.readNodes(nodes), captures(), CLOCK);
        assertThat(inv.devices().get(0).properties()).containsEntry("kfd.node", "2");
        assertThat(inv.devices().get(1).properties()).containsEntry("kfd.node", "3");
        assertThat(inv.devices().get(4).properties()).containsEntry("kfd.node", "6");
        assertThat(inv.topology().linkCount(0, 1)).as("weight 13 inside the package").isEqualTo(3);
        assertThat(inv.topology().linkCount(0, 4)).as("weight 41 across packages").isEqualTo(1);
        assertThat(inv.topology().pcieLevel(0, 1)).isEqualTo(PcieLevel.INTERNAL);
    }

    @Test
    void capturedTrees() {
        Path shared = captures();
        KfdSysfsInventory mi210 =
                KfdSysfsInventory.from(KfdTopology.readNodes(shared.resolve("topo-mi210-xgmi-pcie/nodes")),
                        shared, CLOCK);
        assertThat(mi210.devices()).hasSize(8);
        assertThat(mi210.devices().get(0).pciBusId()).isEqualTo("0000:03:00.0");
        assertThat(mi210.topology().linkCount(0, 3)).isEqualTo(1);
        assertThat(mi210.topology().linkCount(0, 4)).isZero();
        KfdSysfsInventory mi308 = KfdSysfsInventory.from(
                KfdTopology.readNodes(shared.resolve("topology-parsing-mi308/topology/nodes")), shared, CLOCK);
        assertThat(mi308.devices()).hasSize(32).allSatisfy(x -> assertThat(x.architecture()).contains("gfx942"));
        assertThat(mi308.devices().stream().map(x -> x.parentUuid().orElseThrow()).distinct()).hasSize(8);
        assertThat(mi308.devices().get(0).memory()).isEqualTo(MemorySize.ofGibibytes(48));
        KfdSysfsInventory dup = KfdSysfsInventory.from(
                KfdTopology.readNodes(shared.resolve("topology-parsing/topology/nodes")), shared, CLOCK);
        assertThat(dup.devices()).hasSize(2);
        assertThat(dup.problems()).anySatisfy(p -> assertThat(p).contains("KFD nodes 1 and 2 share PCI location"));
    }
}
