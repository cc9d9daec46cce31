package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.core.sim.NodeDescriptions;
import io.gpusched.core.sim.SimulatedGpuInventory;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

class SimulatedProfilesTest {

    static List<String> profiles() {
        return GpuInventories.simulatedProfiles();
    }

    @ParameterizedTest
    @MethodSource("profiles")
    void everyProfileIsAConsistentNode(String name) {
        try (SimulatedGpuInventory inv = GpuInventories.simulated(name)) {
            List<GpuDevice> devs = inv.devices();
            assertThat(inv.backend()).isEqualTo("simulated:" + name);
            assertThat(devs).isNotEmpty();
            Set<String> uuids = new HashSet<>();
            Set<String> bus = new HashSet<>();
            Set<Integer> minors = new HashSet<>();
            for (GpuDevice d : devs) {
                assertThat(uuids.add(d.uuid())).as("unique uuid %s", d.uuid()).isTrue();
                assertThat(bus.add(d.pciBusId())).isTrue();
                assertThat(minors.add(d.minor().getAsInt())).isTrue();
                assertThat(d.numaNode()).isPresent();
                assertThat(d.driverVersion()).isPresent();
                if (d.vendor() == GpuVendor.NVIDIA) {
                    assertThat(d.computeCapability()).isPresent();
                    assertThat(d.uuid()).startsWith("GPU-");
                } else {
                    assertThat(d.architecture()).isPresent();
                }
            }
            GpuTopology t = inv.topology();
            assertThat(t.size()).isEqualTo(devs.size());
            for (GpuDevice a : devs) {
                for (GpuDevice b : devs) {
                    assertThat(t.linkCount(a.index(), b.index())).isEqualTo(t.linkCount(b.index(), a.index()));
                    assertThat(t.pcieLevel(a.index(), b.index())).isEqualTo(t.pcieLevel(b.index(), a.index()));
                }
            }
            assertThat(inv.sample().metrics()).hasSize(devs.size());
        }
    }

    @Test
    void dgx1IsAHybridCubeMeshOfSixLinksPerGpu() {
        GpuTopology t = GpuInventories.simulated("dgx1-v100").topology();
        for (int a = 0; a < 8; a++) {
            int sum = 0;
            int nv2 = 0;
            for (int b = 0; b < 8; b++) {
                sum += t.linkCount(a, b);
                nv2 += t.linkCount(a, b) == 2 ? 1 : 0;
            }
            assertThat(sum).as("links of GPU %d", a).isEqualTo(6);
            assertThat(nv2).isEqualTo(2);
        }
        assertThat(t.linkCount(0, 3)).isEqualTo(2);
        assertThat(t.linkCount(0, 5)).isZero();
        assertThat(t.pcieLevel(0, 1)).isEqualTo(PcieLevel.SINGLE);
        assertThat(t.pcieLevel(0, 2)).isEqualTo(PcieLevel.HOSTBRIDGE);
        assertThat(t.pcieLevel(0, 5)).isEqualTo(PcieLevel.SYSTEM);
        assertThat(t.numaNode(5)).hasValue(1);
    }

    @Test
    void h100IsAllToAllThroughNvSwitch() {
        GpuTopology t = GpuInventories.simulated("dgx-h100").topology();
        assertThat(t.links()).hasSize(28).allSatisfy(l -> assertThat(l.linkCount()).isEqualTo(18));
    }

    @Test
    void a10HasNoNvLinkAndSwitchPairs() {
        GpuTopology t = GpuInventories.simulated("pcie-4xa10").topology();
        assertThat(t.links()).allSatisfy(l -> assertThat(l.linkCount()).isZero());
        assertThat(t.pcieLevel(0, 1)).isEqualTo(PcieLevel.SINGLE);
        assertThat(t.pcieLevel(2, 3)).isEqualTo(PcieLevel.SINGLE);
        assertThat(t.pcieLevel(1, 2)).isEqualTo(PcieLevel.NODE);
    }

    @Test
    void mi210HasTwoXgmiHives() {
        SimulatedGpuInventory inv = GpuInventories.simulated("mi210-8x");
        GpuTopology t = inv.topology();
        for (int a = 0; a < 8; a++) {
            for (int b = 0; b < 8; b++) {
                boolean sameHive = a != b && a / 4 == b / 4;
                assertThat(t.linkCount(a, b)).isEqualTo(sameHive ? 1 : 0);
            }
        }
        assertThat(inv.devices().get(0).vendor()).isEqualTo(GpuVendor.AMD);
        assertThat(inv.devices().get(0).architecture()).contains("gfx90a");
        assertThat(inv.devices().get(0).minor()).hasValue(130);
    }

    @Test
    void unknownProfileNamesTheValidOnes() {
        assertThatThrownBy(() -> GpuInventories.simulated("dgx-2"))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("dgx1-v100");
    }

    @Test
    void yamlNodeDescriptionsAreValidated() {
        assertThatThrownBy(() -> NodeDescriptions.parse("node: x\ndevices: []", "n.yaml"))
                .isInstanceOf(GpuConfigException.class).hasMessageContaining("n.yaml: devices");
        assertThatThrownBy(() -> NodeDescriptions.parse("""
                node: x
                devices:
                  - {index: 0, pci_bus_id: "0:1:0.0", name: A, memory: 1G}
                """, "n.yaml")).hasMessageContaining("devices[0].vendor: is required");
        assertThatThrownBy(() -> NodeDescriptions.parse("""
                node: x
                defaults: {vendor: NVIDIA, name: A, memory: 1G}
                devices:
                  - {index: 0, pci_bus_id: "a", colour: red}
                """, "n.yaml")).hasMessageContaining("devices[0].colour: unknown key");
        assertThatThrownBy(() -> NodeDescriptions.parse("""
                node: x
                defaults: {vendor: NVIDIA, name: A, memory: 1 lot}
                devices:
                  - {index: 0, pci_bus_id: "a"}
                """, "n.yaml")).hasMessageContaining("defaults.memory");
        assertThatThrownBy(() -> NodeDescriptions.parse("""
                node: x
                defaults: {vendor: NVIDIA, name: A, memory: 1G}
                devices:
                  - {index: 0, pci_bus_id: "a"}
                  - {index: 1, pci_bus_id: "b"}
                links: [[0, 2, 1]]
                """, "n.yaml")).hasMessageContaining("links[0]").hasMessageContaining("[0, 1]");
        assertThatThrownBy(() -> NodeDescriptions.parse("""
                node: x
                defaults: {vendor: NVIDIA, name: A, memory: 1G}
                devices:
                  - {index: 0, pci_bus_id: "a"}
                  - {index: 0, pci_bus_id: "b"}
                """, "n.yaml")).hasMessageContaining("clashes");
    }

    @Test
    void metricsAndHealthAreSettable() {
        SimulatedGpuInventory inv = GpuInventories.simulated("pcie-4xa10");
        GpuSample before = inv.sample();
        // A10s count energy (Ampere), so each sample reads the clock anew; the counter never goes back
        assertThat(inv.sample().metrics().get(0).energyMillijoules().getAsLong())
                .isGreaterThanOrEqualTo(before.metrics().get(0).energyMillijoules().getAsLong());
        inv.setMetrics(2, 90, MemorySize.ofGibibytes(20), 81, 140);
        GpuMetrics m = inv.sample().forDevice(2).orElseThrow();
        assertThat(m.utilizationPercent()).hasValue(90);
        assertThat(m.temperatureCelsius()).hasValue(81);
        inv.clearMetrics(3);
        assertThat(inv.sample().forDevice(3).orElseThrow().utilizationPercent()).isEmpty();
        assertThatThrownBy(() -> inv.setMetrics(0, 101, MemorySize.ZERO, 30, 30)).hasMessageContaining("0..100");
        assertThatThrownBy(() -> inv.setMetrics(0, 1, MemorySize.ofGibibytes(30), 30, 30))
                .hasMessageContaining("cannot use");
        assertThatThrownBy(() -> inv.setMetrics(9, 1, MemorySize.ZERO, 30, 30)).hasMessageContaining("not on");
        List<GpuHealth> seen = new java.util.ArrayList<>();
        inv.addHealthListener((d, h) -> seen.add(h));
        inv.setHealth(1, GpuHealth.unhealthy("XID 79"));
        inv.setHealth(1, GpuHealth.unhealthy("XID 79"));
        assertThat(seen).containsExactly(GpuHealth.unhealthy("XID 79"));
        assertThat(inv.health(inv.devices().get(1)).isHealthy()).isFalse();
    }
}
