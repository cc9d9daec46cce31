package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.sim.SimulatedGpuInventory;
import java.util.List;
import org.junit.jupiter.api.Test;

class StrategyTest {

    private static GpuScheduler scheduler(String profile, AllocationStrategy s) {
        return GpuScheduler.builder().inventory(GpuInventories.simulated(profile)).strategy(s).auditLogging(false)
                .build();
    }

    @Test
    void packingPicksTheBestLinkedPairOnAnEmptyDgx1() {
        GpuScheduler s = scheduler("dgx1-v100", AllocationStrategies.packing());
        Allocation a = s.allocate(GpuRequest.builder().count(2).build());
        GpuTopology t = s.inventory().topology();
        assertThat(t.linkCount(a.deviceIndices().get(0), a.deviceIndices().get(1))).isEqualTo(2);
        assertThat(t.pcieLevel(a.deviceIndices().get(0), a.deviceIndices().get(1))).isNotEqualTo(PcieLevel.SYSTEM);
    }

    @Test
    void packingKeepsPcieSwitchPairsIntact() {
        GpuScheduler s = scheduler("pcie-4xa10", AllocationStrategies.packing());
        Allocation first = s.allocate(GpuRequest.builder().build());
        Allocation second = s.allocate(GpuRequest.builder().build());
        assertThat(second.deviceIndices().get(0))
                .as("the second single GPU goes next to the first, leaving the other switch pair whole")
                .isEqualTo(first.deviceIndices().get(0) ^ 1);
        Allocation pair = s.allocate(GpuRequest.builder().count(2).build());
        assertThat(s.inventory().topology().pcieLevel(pair.deviceIndices().get(0), pair.deviceIndices().get(1)))
                .isEqualTo(PcieLevel.SINGLE);
    }

    @Test
    void packingFillsTheFullestNumaNodeThatFits() {
        GpuScheduler s = scheduler("dgx1-v100", AllocationStrategies.packing());
        s.allocate(GpuRequests.fromCliFlags("--devices=4"));
        Allocation a = s.allocate(GpuRequest.builder().count(3).build());
        assertThat(a.deviceIndices()).allSatisfy(i -> assertThat(i).isBetween(5, 7));
        Allocation b = s.allocate(GpuRequest.builder().count(4).build());
        assertThat(b.deviceIndices()).containsExactlyInAnyOrder(0, 1, 2, 3);
    }

    @Test
    void spreadingGoesToTheLeastLoaded() {
        SimulatedGpuInventory inv = GpuInventories.simulated("pcie-4xa10");
        GpuScheduler s = GpuScheduler.builder().inventory(inv).strategy(AllocationStrategies.spreading())
                .auditLogging(false).build();
        inv.setMetrics(0, 90, MemorySize.ZERO, 70, 150);
        inv.setMetrics(1, 10, MemorySize.ZERO, 40, 60);
        inv.setMetrics(2, 50, MemorySize.ZERO, 50, 100);
        inv.setMetrics(3, 5, MemorySize.ZERO, 40, 60);
        s.updateMetrics(inv.sample());
        assertThat(s.allocate(GpuRequest.builder().count(2).build()).deviceIndices()).containsExactly(3, 1);
        Allocation sh1 = s.allocate(GpuRequests.fromCliFlags("--shared=4GB"));
        Allocation sh2 = s.allocate(GpuRequests.fromCliFlags("--shared=4GB"));
        assertThat(List.of(sh1.deviceIndices().get(0), sh2.deviceIndices().get(0))).containsExactly(2, 0);
    }

    @Test
    void spreadingSpreadsAcrossNumaNodes() {
        GpuScheduler s = scheduler("dgx1-v100", AllocationStrategies.spreading());
        Allocation a = s.allocate(GpuRequest.builder().build());
        Allocation b = s.allocate(GpuRequest.builder().build());
        GpuTopology t = s.inventory().topology();
        assertThat(t.numaNode(a.deviceIndices().get(0))).isNotEqualTo(t.numaNode(b.deviceIndices().get(0)));
    }

    @Test
    void byNameKnowsTheBuiltIns() {
        assertThat(AllocationStrategies.byName("packing").name()).isEqualTo("packing");
        assertThat(AllocationStrategies.byName("spreading").name()).isEqualTo("spreading");
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> AllocationStrategies.byName("x"))
                .hasMessageContaining("[packing, spreading, topology, topology-remaining, thermal]");
    }
}
