package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.core.sim.SimulatedGpuInventory;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;

/** {@link GpuScheduler#addListener}: listeners registered at run time, after the builder's. */
class RuntimeListenerTest {

    @Test
    void anAddedListenerHearsLaterChangesAfterTheBuildersAndNothingOnceRemoved() {
        List<String> calls = new CopyOnWriteArrayList<>();
        try (SimulatedGpuInventory inv = GpuInventories.simulated("pcie-4xa10");
             GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false)
                     .listener(e -> calls.add("builder:" + e.type())).build()) {
            Allocation before = s.allocate(GpuRequests.fromCliFlags("--gpu=1"));
            AllocationListener late = e -> calls.add("late:" + e.type());
            s.addListener(late);
            assertThat(calls).containsExactly("builder:ALLOCATED");

            s.release(before.id());
            assertThat(calls).containsExactly("builder:ALLOCATED", "builder:RELEASED", "late:RELEASED");

            assertThat(s.removeListener(late)).isTrue();
            assertThat(s.removeListener(late)).as("removed once, registered once").isFalse();
            s.allocate(GpuRequests.fromCliFlags("--gpu=1"));
            assertThat(calls).containsExactly("builder:ALLOCATED", "builder:RELEASED", "late:RELEASED",
                    "builder:ALLOCATED");
        }
    }

    @Test
    void aThrowingAddedListenerDoesNotStopTheOthersOrTheChange() {
        List<AllocationEvent.Type> heard = new ArrayList<>();
        try (SimulatedGpuInventory inv = GpuInventories.simulated("pcie-4xa10");
             GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false).build()) {
            s.addListener(e -> {
                throw new IllegalStateException("listener bug");
            });
            s.addListener(e -> heard.add(e.type()));
            Allocation a = s.allocate(GpuRequests.fromCliFlags("--gpu=2"));
            assertThat(s.allocations()).containsExactly(a);
            assertThat(heard).containsExactly(AllocationEvent.Type.ALLOCATED);
            assertThatThrownBy(() -> s.addListener(null)).isInstanceOf(NullPointerException.class)
                    .hasMessageContaining("listener");
        }
    }
}
