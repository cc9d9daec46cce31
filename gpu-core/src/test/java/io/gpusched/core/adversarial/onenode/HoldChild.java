package io.gpusched.core.adversarial.onenode;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.HolderProcess;
import io.gpusched.core.MemorySize;
import java.nio.file.Path;

/**
 * A holder process for {@link DeadHolderWaiterAttackTest}: allocates on the state directory (argument 1) every GPU
 * of the simulated DGX-1, bound to itself, exclusively ({@code exclusive}) or as 30 GB shared reservations
 * ({@code shared}), prints {@code HELD <ids>} and then waits to be killed.
 */
public final class HoldChild {
    private HoldChild() {
    }

    public static void main(String[] args) throws Exception {
        try (GpuScheduler s = Nodes.open(GpuInventories.simulated("dgx1-v100"), Path.of(args[0]))) {
            StringBuilder ids = new StringBuilder();
            if (args[1].equals("exclusive")) {
                Allocation a = s.allocate(GpuRequest.builder().count(8).holder(HolderProcess.current()).build());
                ids.append(a.id());
            } else {
                for (int i = 0; i < 8; i++) {
                    Allocation a = s.allocate(GpuRequest.builder().count(1).requiredDevices(i)
                            .shared(MemorySize.parse("30GB")).holder(HolderProcess.current()).build());
                    ids.append(a.id()).append(' ');
                }
            }
            System.out.println("HELD " + ids.toString().trim());
            System.out.flush();
            Thread.sleep(Long.MAX_VALUE);
        }
    }
}
