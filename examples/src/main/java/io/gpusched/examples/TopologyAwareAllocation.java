package io.gpusched.examples;

import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationStrategies;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.GpuTopology;

/** On a DGX-1, packing and topology-aware placement of 2- and 4-GPU jobs, with the NVLinks each set gets. */
public final class TopologyAwareAllocation {
    private TopologyAwareAllocation() {
    }

    /** @param args ignored */
    public static void main(String[] args) {
        try (GpuInventory node = GpuInventories.simulated("dgx1-v100")) {
            GpuTopology t = node.topology();
            for (String name : new String[]{"spreading", "topology"}) {
                GpuScheduler s = GpuScheduler.builder().inventory(node).auditLogging(false)
                        .strategy(AllocationStrategies.byName(name)).build();
                s.allocate(GpuRequest.builder().deviceIndices(0).build());
                for (int k : new int[]{2, 4}) {
                    Allocation a = s.allocate(GpuRequest.builder().count(k).build());
                    int links = 0;
                    for (int i : a.deviceIndices()) {
                        for (int j : a.deviceIndices()) {
                            links += i < j ? t.linkCount(i, j) : 0;
                        }
                    }
                    System.out.println(name + ": " + k + " GPUs -> " + a.deviceIndices() + ", " + links
                            + " NVLinks among them");
                }
                s.close();
            }
        }
    }
}
