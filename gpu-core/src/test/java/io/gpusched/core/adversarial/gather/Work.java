package io.gpusched.core.adversarial.gather;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;

/** The workload of the gathering attacks: exclusive one-GPU allocations and their releases, acknowledged in a list. */
final class Work {
    private Work() {
    }

    static GpuScheduler scheduler(Path dir) {
        return GpuScheduler.builder().inventory(GpuInventories.simulated("dgx-h100")).stateDir(dir)
                .auditLogging(false).maintenanceInterval(Duration.ZERO).build();
    }

    static GpuRequest one() {
        return GpuRequest.builder().count(1).exclusive().owner("gather").build();
    }

    /**
     * One allocate and, when it was granted, its release; acknowledgements appended to {@code acks}.
     *
     * @return the number of changes acknowledged (0 to 2)
     */
    static int cycle(GpuScheduler s, List<String> acks) {
        Allocation a;
        try {
            a = s.allocate(one());
        } catch (GpuAllocationException e) {
            if (e.reason() != GpuAllocationException.Reason.INSUFFICIENT_GPUS) {
                throw e;
            }
            return 0;
        }
        acks.add("A " + a.id() + " " + String.join(",", a.deviceUuids()));
        if (!s.release(a.id())) {
            throw new AssertionError("release of " + a.id() + " just allocated returned false");
        }
        acks.add("R " + a.id());
        return 2;
    }
}
