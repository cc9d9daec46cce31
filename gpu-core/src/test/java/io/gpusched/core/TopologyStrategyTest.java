package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.sim.SimulatedGpuInventory;
import org.junit.jupiter.api.Test;

class TopologyStrategyTest {

    static GpuScheduler topo(GpuInventory inv) {
        return GpuScheduler.builder().inventory(inv).strategy(AllocationStrategies.topologyAware()).auditLogging(false)
                .maintenanceInterval(java.time.Duration.ZERO).build();
    }

    // Exactness against an independent search: TopologyExactnessTest. Must-include devices: RequiredDevicesTest.

    @Test
    void remainingObjectiveThroughTheScheduler() {
        GpuScheduler s = GpuScheduler.builder().inventory(GpuInventories.simulated("dgx1-v100"))
                .config(GpuConfig.builder().strategy("topology-remaining").build()).auditLogging(false)
                .maintenanceInterval(java.time.Duration.ZERO).build();
        s.allocate(GpuRequests.fromCliFlags("--devices=1,3,6,7"));
        assertThat(s.allocate(GpuRequest.builder().count(2).build()).deviceIndices()).containsExactly(4, 5);
        assertThat(s.strategy().name()).isEqualTo("topology-remaining");
    }

    @Test
    void oneGpuTakesTheOneWhosePartnerIsBusy() {
        GpuScheduler s = topo(GpuInventories.simulated("dgx1-v100"));
        s.allocate(GpuRequests.fromCliFlags("--devices=0"));
        Allocation one = s.allocate(GpuRequest.builder().build());
        GpuTopology t = s.inventory().topology();
        int took = one.deviceIndices().get(0);
        assertThat(t.linkCount(0, took)).as("takes a partner of the busy GPU 0, keeping intact pairs").isPositive();
        Allocation four = s.allocate(GpuRequest.builder().count(4).build());
        assertThat(four.deviceIndices()).containsExactlyInAnyOrder(4, 5, 6, 7);
    }

    @Test
    void numaPreferenceAndExplicitIdsAreHonoured() {
        GpuScheduler s = topo(GpuInventories.simulated("dgx1-v100"));
        Allocation a = s.allocate(GpuRequest.builder().count(2).preferredNuma(1).build());
        assertThat(a.deviceIndices()).allSatisfy(i -> assertThat(i).isGreaterThanOrEqualTo(4));
        Allocation b = s.allocate(GpuRequests.fromCliFlags("--devices=3,0"));
        assertThat(b.deviceIndices()).containsExactly(3, 0);
    }

    @Test
    void sharedRequestsPreferSharedGpus() {
        GpuScheduler s = topo(GpuInventories.simulated("pcie-4xa10"));
        Allocation first = s.allocate(GpuRequests.fromCliFlags("--shared=4GB"));
        Allocation second = s.allocate(GpuRequests.fromCliFlags("--shared=4GB"));
        assertThat(second.deviceIndices()).isEqualTo(first.deviceIndices());
    }

    @Test
    void largePoolsUseTheHeuristicAndStillFindLinkedSets() {
        SimulatedGpuInventory.Builder b = SimulatedGpuInventory.builder("64-part");
        for (int i = 0; i < 64; i++) {
            b.device(GpuDevice.builder().index(i).uuid("MIG-" + i).vendor(GpuVendor.NVIDIA).name("A100 MIG 1g.10gb")
                    .memory(MemorySize.ofGibibytes(10)).pciBusId("b" + (i / 8)).numaNode(i / 32).minor(i / 8)
                    .parentUuid("GPU-" + (i / 8)).build());
        }
        for (int i = 0; i < 64; i++) {
            for (int j = i + 1; j < 64; j++) {
                if (i / 8 == j / 8) {
                    b.pcie(i, j, PcieLevel.INTERNAL);
                } else if (i / 16 == j / 16) {
                    b.links(i, j, 12);
                }
            }
        }
        GpuScheduler s = topo(b.build());
        Allocation a = s.allocate(GpuRequest.builder().count(16).build());
        assertThat(a.deviceIndices().stream().map(i -> i / 16).distinct()).as("one NVLink pair of GPUs").hasSize(1);
    }
}
