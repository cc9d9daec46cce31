package io.gpusched.core.adversarial.onenode;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import java.nio.file.Path;
import java.time.Duration;

/**
 * A waiting process: on the state directory (argument 1), with {@code maintenanceInterval(ZERO)}, waits up to
 * argument 3 seconds for argument 2 GPUs; prints {@code WAITING}, then {@code SERVED <id>} or {@code FAILED <why>}.
 */
public final class WaitChild {
    private WaitChild() {
    }

    public static void main(String[] args) throws Exception {
        try (GpuScheduler s = Nodes.open(GpuInventories.simulated("dgx1-v100"), Path.of(args[0]))) {
            System.out.println("WAITING");
            System.out.flush();
            try {
                Allocation a = s.allocate(GpuRequest.builder().count(Integer.parseInt(args[1])).build(),
                        Duration.ofSeconds(Long.parseLong(args[2])));
                System.out.println("SERVED " + a.id());
            } catch (RuntimeException e) {
                System.out.println("FAILED " + e.toString().replace('\n', ' '));
            }
            System.out.flush();
        }
    }
}
