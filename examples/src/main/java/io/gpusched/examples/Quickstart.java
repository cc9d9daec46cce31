package io.gpusched.examples;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.MemorySize;

/** The README's quick start: a simulated DGX-1, two GPUs with at least 16 GiB each, then release. */
public final class Quickstart {

    private Quickstart() {
    }

    /** @param args ignored */
    public static void main(String[] args) {
        try (GpuInventory node = GpuInventories.simulated("dgx1-v100");
             GpuScheduler scheduler = GpuScheduler.builder().inventory(node).build()) {
            GpuRequest request = GpuRequest.builder()
                    .count(2)
                    .minMemory(MemorySize.parse("16GB"))
                    .owner("alice")
                    .build();
            Allocation a = scheduler.allocate(request);
            System.out.println("got " + a.deviceUuids() + " as " + a.id());
            System.out.println(scheduler.statusJson());
            scheduler.release(a.id());
        }
    }
}
