package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.testing.ManualClock;
import java.time.Duration;
import org.junit.jupiter.api.Test;

class ThermalStrategyTest {

    /** 4 GPUs on one NUMA node; 0 and 1 NVLinked when {@code linked}. */
    static SimulatedGpuInventory node(ManualClock clock, boolean linked) {
        SimulatedGpuInventory.Builder b = SimulatedGpuInventory.builder("thermal").clock(clock);
        for (int i = 0; i < 4; i++) {
            b.device(GpuDevice.builder().index(i).uuid("GPU-t-" + i).vendor(GpuVendor.NVIDIA).name("NVIDIA L4")
                    .memory(MemorySize.ofGibibytes(24)).pciBusId("b" + i).numaNode(0).minor(i).build());
        }
        if (linked) {
            b.links(0, 1, 2);
        }
        return b.build();
    }

    static GpuScheduler thermal(SimulatedGpuInventory inv, ManualClock clock) {
        return GpuScheduler.builder().inventory(inv).clock(clock).auditLogging(false)
                .maintenanceInterval(Duration.ZERO)
                .config(GpuConfig.builder().strategy("thermal").sampleMaxAge(Duration.ofSeconds(30)).build()).build();
    }

    @Test
    void coolestWinsAmongTopologyEquals() {
        ManualClock clock = new ManualClock(java.time.Instant.parse("2026-01-01T00:00:00Z"));
        SimulatedGpuInventory inv = node(clock, true);
        GpuScheduler s = thermal(inv, clock);
        int[] temps = {30, 30, 80, 50};
        for (int i = 0; i < 4; i++) {
            inv.setMetrics(i, 20, MemorySize.ZERO, temps[i], 100);
        }
        s.updateMetrics(inv.sample());
        GpuScheduler plain = GpuScheduler.builder().inventory(inv).auditLogging(false)
                .strategy(AllocationStrategies.topologyAware()).maintenanceInterval(Duration.ZERO).build();
        assertThat(plain.allocate(GpuRequest.builder().build()).deviceIndices()).as("topology alone: 2 before 3")
                .containsExactly(2);
        assertThat(s.allocate(GpuRequest.builder().build()).deviceIndices())
                .as("2 and 3 tie on topology (0 and 1 are a pair to keep); the cooler 3 wins").containsExactly(3);
        assertThat(s.strategy().name()).isEqualTo("thermal(topology)");
    }

    @Test
    void topologyComesFirstThermalOnlyBreaksTies() {
        ManualClock clock = new ManualClock(java.time.Instant.parse("2026-01-01T00:00:00Z"));
        SimulatedGpuInventory inv = node(clock, true);
        GpuScheduler s = thermal(inv, clock);
        inv.setMetrics(0, 0, MemorySize.ZERO, 90, 100);
        inv.setMetrics(1, 0, MemorySize.ZERO, 90, 100);
        inv.setMetrics(2, 0, MemorySize.ZERO, 30, 100);
        inv.setMetrics(3, 0, MemorySize.ZERO, 35, 100);
        s.updateMetrics(inv.sample());
        assertThat(s.allocate(GpuRequest.builder().count(2).build()).deviceIndices())
                .as("the NVLinked pair (0,1) beats the cool unlinked pair").containsExactlyInAnyOrder(0, 1);
    }

    /** Training request, 4 unlinked GPUs, equal utilization: who gets one GPU at these temperatures. */
    static int coolest(int t0, int t1, int t2, int t3) {
        ManualClock clock = new ManualClock(java.time.Instant.parse("2026-01-01T00:00:00Z"));
        SimulatedGpuInventory inv = node(clock, false);
        GpuScheduler s = thermal(inv, clock);
        int[] t = {t0, t1, t2, t3};
        for (int i = 0; i < 4; i++) {
            inv.setMetrics(i, 50, MemorySize.ZERO, t[i], 100);
        }
        s.updateMetrics(inv.sample());
        return s.allocate(GpuRequest.builder().build()).deviceIndices().get(0);
    }

    @Test
    void temperatureRanksOnlyBeyondTheTolerance() {
        // 44 vs 45 straddles a multiple of 5: fixed 5-degree bands would rank them; a 1 degree gap must not
        assertThat(coolest(45, 44, 90, 90)).as("45 vs 44: within tolerance, index order").isEqualTo(0);
        assertThat(coolest(44, 45, 90, 90)).as("44 vs 45: within tolerance, index order").isEqualTo(0);
        // exactly the tolerance apart is still equal; one degree more ranks
        assertThat(coolest(45, 40, 90, 90)).as("5 degrees apart: equal").isEqualTo(0);
        assertThat(coolest(46, 40, 90, 90)).as("6 degrees apart: the cooler one").isEqualTo(1);
        assertThat(coolest(90, 90, 46, 40)).as("and the same further down the index order").isEqualTo(3);
        // readings that chain within the tolerance share a rank: 41, 44, 47 are one rank, index order decides
        assertThat(coolest(47, 44, 41, 90)).isEqualTo(0);
        // a gap above the tolerance anywhere in the chain splits it
        assertThat(coolest(52, 44, 41, 90)).as("52 is 8 above 44: 41 and 44 rank first, index order").isEqualTo(1);
        assertThat(io.gpusched.core.strategy.ThermalAwareStrategy.TEMP_BAND).as("the tolerance written for")
                .isEqualTo(5);
    }

    @Test
    void staleSamplesRankAfterFreshOnes() {
        ManualClock clock = new ManualClock(java.time.Instant.parse("2026-01-01T00:00:00Z"));
        SimulatedGpuInventory inv = node(clock, false);
        GpuScheduler s = thermal(inv, clock);
        for (int i = 0; i < 4; i++) {
            inv.setMetrics(i, 50, MemorySize.ZERO, 41 + i, 100);
        }
        s.updateMetrics(inv.sample());
        assertThat(s.allocate(GpuRequest.builder().build()).deviceIndices()).as("1 °C is noise: index order")
                .containsExactly(0);
        clock.advance(Duration.ofMinutes(5));
        inv.setMetrics(3, 95, MemorySize.ZERO, 85, 300);
        s.updateMetrics(inv.sample());
        assertThat(s.allocate(GpuRequest.builder().build()).deviceIndices())
                .as("GPU 3's fresh sample is hot; 1 and 2 are stale, the fresh one ranks first among equals")
                .containsExactly(3);
    }

    @Test
    void inferencePacksOntoSharedGpus() {
        ManualClock clock = new ManualClock(java.time.Instant.parse("2026-01-01T00:00:00Z"));
        SimulatedGpuInventory inv = node(clock, false);
        GpuScheduler s = thermal(inv, clock);
        for (int i = 0; i < 4; i++) {
            inv.setMetrics(i, 10, MemorySize.ZERO, i == 2 ? 30 : 70, 100);
        }
        s.updateMetrics(inv.sample());
        Allocation first = s.allocate(GpuRequest.builder().shared(MemorySize.ofGibibytes(4)).build());
        assertThat(first.deviceIndices()).as("coolest").containsExactly(2);
        inv.setMetrics(2, 10, MemorySize.ZERO, 75, 100);
        s.updateMetrics(inv.sample());
        Allocation second = s.allocate(GpuRequest.builder().shared(MemorySize.ofGibibytes(4))
                .hint(WorkloadHint.INFERENCE).build());
        assertThat(second.deviceIndices()).isEqualTo(first.deviceIndices());
    }
}
