package io.gpusched.accounting.adversarial.accounting;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AllocationUsage;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * One sweep taken under a clock that is wrong by more than {@code gpu.accounting.retention} (an RTC that booted into
 * the future, a VM snapshot's clock) must not destroy the node's accounting: the store is "retained by age", and its
 * age is not a wrong clock's. The clock is corrected a moment later; yesterday's records must still be there.
 */
@Tag("adversarial")
class ClockJumpRetentionTest {
    @TempDir
    Path dir;

    @Test
    void aSingleSweepUnderAFarFutureClockDoesNotDeleteTheStore() {
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofSeconds(30)))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 80));
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            node.run(Duration.ofMinutes(1), 5);
            node.scheduler.release(a.id());
            assertThat(AllocationUsage.find(node.store, a.id())).as("recorded").isPresent();
            node.clock.set(AccountingNode.T0.plus(Duration.ofDays(401))); // one sweep under a wrong clock
            node.sweep();
            node.clock.set(AccountingNode.T0.plus(Duration.ofHours(1))); // NTP corrects it
            node.sweep();
            assertThat(node.store.days()).as("journals left in the store").isNotEmpty();
            assertThat(AllocationUsage.find(node.store, a.id())).as("alice's allocation of an hour ago").isPresent();
        }
    }
}
