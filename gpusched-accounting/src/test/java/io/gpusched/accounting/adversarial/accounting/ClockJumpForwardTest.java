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
 * The wall clock steps forward for one sweep (a VM restored with a stale-then-corrected clock, an RTC read wrong at
 * boot and fixed by NTP a minute later) and comes back. The property "GPU-seconds never exceed wall time x GPUs
 * held" and docs/ACCOUNTING.md's "GPU-seconds: grant to release, from the ledger's times, exact" must still hold: the
 * ledger says the allocation was held 4 minutes.
 */
@Tag("adversarial")
class ClockJumpForwardTest {
    @TempDir
    Path dir;

    @Test
    void oneSweepUnderAClockThreeDaysAheadDoesNotCreditThreeDaysOfGpuTime() {
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofSeconds(30)))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 50));
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            node.run(Duration.ofMinutes(1), 2); // T0+2m
            node.clock.set(AccountingNode.T0.plus(Duration.ofDays(3))); // the clock steps ahead for one sweep
            node.sweep();
            node.clock.set(AccountingNode.T0.plus(Duration.ofMinutes(3))); // and is corrected
            node.sweep();
            node.clock.advance(Duration.ofMinutes(1));
            node.sweep();
            node.scheduler.release(a.id()); // released at T0+4m by the ledger's clock
            long ledgerHeld = Duration.ofMinutes(4).toMillis();
            AllocationUsage u = AllocationUsage.find(node.store, a.id()).orElseThrow();
            assertThat(u.total().heldMillis()).as("GPU-ms held, per the accounting store; the ledger held it %d ms"
                    + " (grant %s, release at T0+4m); record runs %s..%s", ledgerHeld, a.createdAt(), u.from(), u.to())
                    .isLessThanOrEqualTo(ledgerHeld);
        }
    }
}
