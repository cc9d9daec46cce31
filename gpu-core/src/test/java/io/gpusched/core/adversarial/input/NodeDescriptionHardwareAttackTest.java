package io.gpusched.core.adversarial.input;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.gpusched.core.GpuConfigException;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuSample;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.sim.NodeDescriptions;
import io.gpusched.core.sim.SimulatedGpuInventory;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Node descriptions that would make one device's fence, gres.conf line or CDI entry reach another device, or put
 * text of their own into a shell variable or a terminal (issue 36 item 6). Each must be refused with a
 * {@link GpuConfigException} naming the devices (by index) and what is valid; the realistic shapes (MIG devices of a
 * parent that is not listed, sharing its minor and PCI id) must still load.
 */
@Tag("adversarial")
class NodeDescriptionHardwareAttackTest {

    private static final String HEAD = "node: evil\ndefaults: {vendor: NVIDIA, name: NVIDIA A100, memory: 40GiB,"
            + " compute_capability: \"8.0\"}\ndevices:\n";

    private static String refused(String yaml) {
        Throwable t = catchThrowable(() -> NodeDescriptions.parse(yaml, "evil.yaml"));
        assertThat(t).as("refused:\n" + yaml).isInstanceOf(GpuConfigException.class);
        assertThat(t.getMessage()).startsWith("evil.yaml: ");
        return t.getMessage();
    }

    @Test
    void twoWholeGpusWithOneMinorAreRefusedNamingBoth() {
        String m = refused(HEAD + "  - {index: 0, pci_bus_id: \"00000000:17:00.0\", minor: 3}\n"
                + "  - {index: 1, pci_bus_id: \"00000000:18:00.0\", minor: 3}\n");
        assertThat(m).contains("index 1").contains("minor 3").contains("device 0");
    }

    @Test
    void theDefaultMinorOfOneDeviceClashingWithAnotherDevicesGivenMinorIsRefused() {
        // device 1's minor defaults to its index, 1; device 0 names minor 1 explicitly
        String m = refused(HEAD + "  - {index: 0, pci_bus_id: \"00000000:17:00.0\", minor: 1}\n"
                + "  - {index: 1, pci_bus_id: \"00000000:18:00.0\"}\n");
        assertThat(m).contains("minor 1");
    }

    @Test
    void onePciDeviceGivenTwiceIsRefusedWhateverItsSpelling() {
        assertThat(refused(HEAD + "  - {index: 0, pci_bus_id: \"00000000:17:00.0\"}\n"
                + "  - {index: 1, pci_bus_id: \"00000000:17:00.0\"}\n")).contains("pci_bus_id").contains("device 0");
        // the 4-digit domain NVML prints elsewhere and upper/lower case name the same function
        assertThat(refused(HEAD + "  - {index: 0, pci_bus_id: \"00000000:1A:00.0\"}\n"
                + "  - {index: 1, pci_bus_id: \"0000:1a:00.0\"}\n")).contains("pci_bus_id");
    }

    @Test
    void aParentThatIsTheDeviceItselfIsRefused() {
        String m = refused(HEAD + "  - {index: 0, uuid: GPU-a, pci_bus_id: \"00000000:17:00.0\", parent: GPU-a}\n");
        assertThat(m).contains("index 0").contains("the device itself");
    }

    @Test
    void parentsThatNameEachOtherAreRefused() {
        String m = refused(HEAD + "  - {index: 0, uuid: MIG-a, pci_bus_id: \"00000000:17:00.0\", parent: MIG-b}\n"
                + "  - {index: 1, uuid: MIG-b, pci_bus_id: \"00000000:17:00.0\", parent: MIG-a}\n");
        assertThat(m).contains("cycle");
    }

    @Test
    void aParentListedAsAWholeDeviceIsRefused() {
        // the same GPU allocatable whole (device 0) and as its partition (device 1)
        String m = refused(HEAD + "  - {index: 0, uuid: GPU-a, pci_bus_id: \"00000000:17:00.0\", minor: 0}\n"
                + "  - {index: 1, uuid: MIG-a1, pci_bus_id: \"00000000:17:00.0\", minor: 0, parent: GPU-a}\n");
        assertThat(m).contains("index 1").contains("device 0");
    }

    @Test
    void aPartitionNamingAParentButAnotherGpusNodeIsRefused() {
        // a "MIG device" whose parent is GPU-x but whose minor is device 0's: its fence would open device 0
        String m = refused(HEAD + "  - {index: 0, pci_bus_id: \"00000000:17:00.0\", minor: 0}\n"
                + "  - {index: 1, uuid: MIG-x1, pci_bus_id: \"00000000:18:00.0\", minor: 0, parent: GPU-x}\n");
        assertThat(m).contains("minor 0");
    }

    @Test
    void partitionsOfOneParentOnTwoPciDevicesOrMinorsAreRefused() {
        assertThat(refused(HEAD
                + "  - {index: 0, uuid: MIG-1, pci_bus_id: \"00000000:17:00.0\", minor: 0, parent: GPU-p}\n"
                + "  - {index: 1, uuid: MIG-2, pci_bus_id: \"00000000:18:00.0\", minor: 0, parent: GPU-p}\n"))
                .contains("different PCI devices");
        assertThat(refused(HEAD
                + "  - {index: 0, uuid: MIG-1, pci_bus_id: \"00000000:17:00.0\", minor: 0, parent: GPU-p}\n"
                + "  - {index: 1, uuid: MIG-2, pci_bus_id: \"00000000:17:00.0\", minor: 1, parent: GPU-p}\n"))
                .contains("different minors");
    }

    @Test
    void migDevicesOfAnUnlistedParentSharingItsMinorAndPciIdStillLoad() throws Exception {
        try (GpuInventory inv = NodeDescriptions.parse(HEAD
                + "  - {index: 0, uuid: MIG-1, pci_bus_id: \"00000000:17:00.0\", minor: 0, parent: GPU-p}\n"
                + "  - {index: 1, uuid: MIG-2, pci_bus_id: \"00000000:17:00.0\", minor: 0, parent: GPU-p}\n"
                + "  - {index: 2, pci_bus_id: \"00000000:18:00.0\", minor: 1}\n", "mig.yaml")) {
            assertThat(inv.devices()).hasSize(3);
        }
    }

    @Test
    void aLinkPairGivenTwiceIsRefusedInEitherOrder() {
        String devs = HEAD + "  - {index: 0, pci_bus_id: \"00000000:17:00.0\"}\n"
                + "  - {index: 1, pci_bus_id: \"00000000:18:00.0\"}\n";
        assertThat(refused(devs + "links: [[0, 1, 4], [1, 0, 2]]\n")).contains("given twice").contains("[0, 1, 4]");
        assertThat(refused(devs + "links: [[0, 1, 4], [0, 1, 4]]\n")).contains("given twice");
        assertThat(refused(devs + "pcie: [[0, 1, SINGLE], [1, 0, SYSTEM]]\n")).contains("given twice");
        assertThat(refused(devs + "fabric_links: 18\nlinks: [[0, 1, 2]]\n")).contains("fabric_links");
        assertThat(refused(devs + "links: [[0, 1, -3]]\n")).contains("0 or more");
    }

    @ParameterizedTest
    @ValueSource(strings = {"\"GPU-x\\nLD_PRELOAD=/tmp/evil.so\"", "\"GPU-a,GPU-b\"", "\"GPU x\"", "\"GPU-$(id)\"",
        "\"-GPU\"", "\"GPU-\\e[2J\""})
    void uuidsThatAreNotPlainTokensAreRefused(String uuid) {
        String m = refused(HEAD + "  - {index: 0, uuid: " + uuid + ", pci_bus_id: \"00000000:17:00.0\"}\n");
        assertThat(m).contains("uuid").doesNotContain("\n");
    }

    @Test
    void namesWithTerminalEscapesNewlinesOrBidiOverridesAndOverlongOnesAreRefused() {
        for (String name : List.of("\"A100\\e]0;owned\\a\"", "\"A100\\nx\"", "\"A100\\u202Egnp.exe\"",
                "\"" + "A".repeat(300) + "\"")) {
            String m = refused(HEAD + "  - {index: 0, name: " + name + ", pci_bus_id: \"00000000:17:00.0\"}\n");
            assertThat(m).contains("name").doesNotContain("\u001b").doesNotContain("\u202e");
        }
        assertThat(refused("node: \"evil\\e[2J\"\ndevices:\n  - {index: 0, vendor: NVIDIA, name: x, memory: 1GiB,"
                + " pci_bus_id: \"00000000:17:00.0\"}\n")).contains("node");
        assertThat(refused(HEAD + "  - {index: 0, pci_bus_id: \"00000000:17:00.0\","
                + " properties: {serial: \"1\\r\\n2\"}}\n")).contains("serial");
    }

    @Test
    void everyBuiltInProfileStillLoads() throws Exception {
        for (String p : NodeDescriptions.PROFILES) {
            try (GpuInventory inv = NodeDescriptions.profile(p)) {
                assertThat(inv.devices()).isNotEmpty();
            }
        }
    }

    @Test
    void aBackendReportingAHostileNameIsRefusedWhereItsDevicesEnterTheScheduler() {
        GpuDevice evil = new GpuDevice(0, "GPU-x\nCUDA_VISIBLE_DEVICES=all", GpuVendor.NVIDIA, "A100",
                MemorySize.ofGibibytes(40), Optional.empty(), Optional.empty(), "00000000:17:00.0", OptionalInt.empty(),
                OptionalInt.of(0), Optional.empty(), Optional.empty(), Map.of(), true);
        GpuInventory inv = new HostileInventory(List.of(evil));
        assertThatThrownBy(() -> GpuScheduler.builder().inventory(inv).build())
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("uuid")
                .hasMessageContaining("\\u000A");
        assertThatThrownBy(() -> SimulatedGpuInventory.builder("x").device(evil))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("uuid");
    }

    /** An inventory that reports what it is given, as a buggy or hostile backend could. */
    private record HostileInventory(List<GpuDevice> devices) implements GpuInventory {
        @Override
        public String backend() {
            return "hostile";
        }

        @Override
        public GpuTopology topology() {
            return GpuTopology.unconnected(devices);
        }

        @Override
        public GpuSample sample() {
            return new GpuSample(Instant.now(), List.of());
        }

        @Override
        public GpuHealth health(GpuDevice device) {
            return GpuHealth.HEALTHY;
        }

        @Override
        public void close() {
        }
    }
}
