package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Must-include devices end to end: through the scheduler, for every built-in strategy name. */
class RequiredDevicesSchedulerTest {

    static GpuScheduler scheduler(String strategy) {
        return GpuScheduler.builder().inventory(GpuInventories.simulated("dgx1-v100")).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).config(GpuConfig.builder().strategy(strategy).build()).build();
    }

    @ParameterizedTest
    @ValueSource(strings = {"packing", "spreading", "topology", "topology-remaining", "thermal"})
    void theAllocationHoldsTheRequiredDevicesAndTheRestOfTheCount(String strategy) {
        GpuScheduler s = scheduler(strategy);
        Allocation a = s.allocate(GpuRequest.builder().count(3).requiredDevices(6, 1).build());
        assertThat(a.deviceIndices()).hasSize(3).contains(6, 1).doesNotHaveDuplicates();
        Allocation b = s.allocate(GpuRequest.builder().count(2).requiredDevices(4).build());
        assertThat(b.deviceIndices()).hasSize(2).contains(4).doesNotContainAnyElementsOf(a.deviceIndices());
        assertThatThrownBy(() -> s.allocate(GpuRequest.builder().count(2).requiredDevices(6).build()))
                .as("a held required device is refused, nothing else handed out")
                .isInstanceOf(GpuAllocationException.class).hasMessageContaining("6");
        assertThat(s.allocations()).hasSize(2);
    }

    @ParameterizedTest
    @ValueSource(strings = {"topology", "thermal"})
    void topologyAddsTheBestConnectedToTheRequired(String strategy) {
        GpuScheduler s = scheduler(strategy);
        // 4-7: two NVLinks over one host bridge, the best partner of 4
        assertThat(s.allocate(GpuRequest.builder().count(2).requiredDevices(4).build()).deviceIndices())
                .containsExactlyInAnyOrder(4, 7);
    }
}
