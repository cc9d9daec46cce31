package io.gpusched.server.adversarial.held;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.server.ConsoleServer;
import java.nio.file.Path;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code maxHeldRequests} must be under {@code threads} ("so that some workers stay for other requests"), and the
 * builder refuses {@code threads(4).maxHeldRequests(4)}; but the check is skipped for {@code threads(1)}, so a console
 * of one worker takes {@code maxHeldRequests(1)}, and its default is 1 too: one wait for GPUs then holds the only
 * worker, and nobody's status, release or whoami is answered until it ends, the starvation the bound exists to stop.
 */
@Tag("adversarial")
class HeldBoundOnOneWorkerAttackTest {

    @Test
    void aBoundEqualToTheOnlyWorkerIsRefused(@TempDir Path dir) throws Exception {
        try (SimulatedGpuInventory inv = GpuInventories.simulated("pcie-4xa10");
             GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false).build()) {
            assertThatThrownBy(() -> {
                try (ConsoleServer c = ConsoleServer.builder().scheduler(s).stateDir(dir).threads(1)
                        .maxHeldRequests(1).build()) {
                    c.hashCode();
                }
            }).as("threads(1).maxHeldRequests(1): held requests may take every worker")
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("under the 1 threads");
        }
    }
}
