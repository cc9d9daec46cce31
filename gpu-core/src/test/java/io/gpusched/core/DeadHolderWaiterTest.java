package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A waiter whose GPUs are all held by a process that died is served by reclaiming them itself, on a scheduler with
 * no maintenance thread ({@code maintenanceInterval(ZERO)}, as every host helper builds it), in memory and on a node
 * ledger. Before, it waited its whole {@code maxWait} (the test gives 60 s and fails on the timeout).
 */
class DeadHolderWaiterTest {

    @ParameterizedTest
    @ValueSource(booleans = {false, true})
    void waiterReclaimsADeadHoldersGpus(boolean ledger, @TempDir Path dir) throws Exception {
        Process child = new ProcessBuilder("sleep", "600").start();
        try (GpuScheduler s = build(ledger ? dir : null)) {
            HolderProcess holder = HolderProcess.of(child.pid());
            Allocation all = s.allocate(GpuRequest.builder().count(8).holder(holder).build());
            assertThat(all.devices()).hasSize(8);
            Thread killer = new Thread(() -> {
                try {
                    Thread.sleep(200);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                child.destroyForcibly();
            });
            killer.start();
            Allocation mine = s.allocate(GpuRequest.builder().count(2).build(), Duration.ofSeconds(60));
            killer.join();
            assertThat(mine.devices()).hasSize(2);
            assertThat(s.allocation(all.id())).as("the dead holder's allocation was reclaimed").isEmpty();
        } finally {
            child.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
        }
    }

    private static GpuScheduler build(Path dir) {
        GpuScheduler.Builder b = GpuScheduler.builder().inventory(GpuInventories.simulated("dgx1-v100"))
                .auditLogging(false).maintenanceInterval(Duration.ZERO);
        if (dir != null) {
            b.stateDir(dir);
        }
        return b.build();
    }
}
