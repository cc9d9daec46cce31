package io.gpusched.examples;

import io.gpusched.core.AllocationStrategies;
import io.gpusched.core.AllocationStrategy;
import io.gpusched.core.DeviceState;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuRequest.Builder;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.SchedulingView;
import java.util.Comparator;
import java.util.List;

/** A host's own strategy in twenty lines: prefer high-numbered GPUs, then let topology decide among them. */
public final class CustomStrategy {
    private CustomStrategy() {
    }

    /** Ranks candidates by descending index and hands the view to the topology-aware strategy as a tie-break. */
    static final AllocationStrategy HIGH_FIRST = new AllocationStrategy() {
        private final AllocationStrategy topology = AllocationStrategies.topologyAware();

        @Override
        public String name() {
            return "high-first";
        }

        @Override
        public List<Integer> select(GpuRequest request, SchedulingView view) {
            return topology.select(request, SchedulingView.reordered(view,
                    Comparator.comparingInt(DeviceState::index).reversed()));
        }
    };

    /** @param args ignored */
    public static void main(String[] args) {
        try (GpuInventory node = GpuInventories.simulated("dgx-h100");
             GpuScheduler s = GpuScheduler.builder().inventory(node).strategy(HIGH_FIRST).auditLogging(false)
                     .build()) {
            Builder two = GpuRequest.builder().count(2);
            System.out.println(HIGH_FIRST.name() + " gives " + s.allocate(two.build()).deviceIndices()
                    + " on an all-to-all H100 node, where topology alone would give [0, 1]");
        }
    }
}
