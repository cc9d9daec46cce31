package io.gpusched.core.sim;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuInventories;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** A simulated node follows a health file written by another process: GPUs lost and recovered from outside. */
class SimulatedHealthFileTest {
    @TempDir
    Path dir;

    @Test
    void linesMakeGpusUnhealthyAndTheirRemovalHealthyAgainListenersHear() throws Exception {
        Path file = dir.resolve("health");
        try (SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100")) {
            List<String> heard = new CopyOnWriteArrayList<>();
            inv.addHealthListener((d, h) -> heard.add(d.index() + " " + h.isHealthy()));
            inv.followHealthFile(file, Duration.ofMillis(20));
            Files.writeString(file, "3 XID 79: fell off the bus\n99 not on this node\nnonsense\n");
            await(() -> !inv.health(inv.devices().get(3)).isHealthy());
            assertThat(inv.health(inv.devices().get(3)).reason()).contains("XID 79: fell off the bus");
            assertThat(inv.devices().stream().filter(d -> !inv.health(d).isHealthy()).count()).isEqualTo(1);
            Files.writeString(file, "5\n");
            await(() -> inv.health(inv.devices().get(3)).isHealthy() && !inv.health(inv.devices().get(5)).isHealthy());
            Files.delete(file);
            await(() -> inv.devices().stream().allMatch(d -> inv.health(d).isHealthy()));
            assertThat(heard).containsSubsequence("3 false", "3 true", "5 false", "5 true");
        }
    }

    @Test
    void closeStopsFollowingAndABadIntervalIsRefused() throws Exception {
        Path file = dir.resolve("health");
        SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100");
        assertThrows(IllegalArgumentException.class, () -> inv.followHealthFile(file, Duration.ZERO));
        inv.followHealthFile(file, Duration.ofMillis(20));
        inv.close();
        Thread.sleep(100);
        Files.writeString(file, "2 lost\n");
        Thread.sleep(200);
        assertThat(inv.health(inv.devices().get(2))).isEqualTo(GpuHealth.HEALTHY);
    }

    private static void await(BooleanSupplier c) throws InterruptedException {
        long deadline = System.nanoTime() + 60_000_000_000L; // a loaded host
        while (!c.getAsBoolean() && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        assertThat(c.getAsBoolean()).as("condition reached within 60 s").isTrue();
    }
}
