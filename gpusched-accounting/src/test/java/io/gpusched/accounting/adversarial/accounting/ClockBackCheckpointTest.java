package io.gpusched.accounting.adversarial.accounting;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AllocationUsage;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.Optional;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * NTP steps the clock back an hour. docs/ACCOUNTING.md: "A crash (or kill -9) of the sampler loses what it had not
 * written: at most one checkpoint interval." An allocation granted after the step must still be checkpointed every
 * {@code gpu.accounting.checkpoint} (30 s here): what is in the store while the sampler runs is what a kill -9 now
 * would leave.
 */
@Tag("adversarial")
class ClockBackCheckpointTest {
    @TempDir
    Path dir;

    @Test
    void afterTheClockStepsBackCheckpointsStillComeEveryInterval() {
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofSeconds(30)))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 50));
            node.inventory.setTrace(1, UsageTrace.of(Duration.ofSeconds(10), 50));
            node.sweep();
            node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            node.run(Duration.ofSeconds(10), 30); // T0+5m
            node.clock.set(AccountingNode.T0.minus(Duration.ofHours(1))); // NTP steps the clock back
            node.sweep();
            Allocation b = node.scheduler.allocate(GpuRequest.builder().requiredDevices(1).owner("bob").build());
            node.run(Duration.ofSeconds(10), 180); // 30 minutes of sweeps
            Optional<AllocationUsage> u = AllocationUsage.find(node.store, b.id());
            Instant durable = u.map(AllocationUsage::to).orElse(b.createdAt());
            assertThat(Duration.between(durable, node.clock.instant())).as("bob's usage a kill -9 now would lose"
                    + " (granted %s, now %s, in the store: %s)", b.createdAt(), node.clock.instant(), u.isPresent())
                    .isLessThanOrEqualTo(Duration.ofSeconds(30));
        }
    }
}
