package io.gpusched.accounting.adversarial.accounting;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AllocationUsage;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The node's service is stopped for a week while a long job keeps its GPU (a holiday, a broken unit), then started: its
 * sampler records the week as a {@code gap}, one interval per UTC day, in one batch. docs/ACCOUNTING.md: "A batch is all
 * or nothing", "nothing is counted twice". The sweeps must go on without an error, and the record must hold what the
 * ledger says: 7 days and 10 minutes, once.
 */
@Tag("adversarial")
class LongGapTest {
    @TempDir
    Path dir;

    @Test
    void aWeekWithoutSamplerIsRecordedOnceAndTheSweepsGoOn() {
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofSeconds(30)))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 50));
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            node.run(Duration.ofMinutes(1), 5);
            node.stopSampler();
            node.clock.advance(Duration.ofDays(7)); // nobody samples for a week
            node.startSampler();
            List<RuntimeException> errors = new ArrayList<>();
            for (int i = 0; i < 5; i++) { // the console's tick logs a failed sweep and goes on
                try {
                    node.sweep();
                } catch (RuntimeException e) {
                    errors.add(e);
                }
                node.clock.advance(Duration.ofMinutes(1));
            }
            node.scheduler.release(a.id());
            long ledgerHeld = Duration.between(a.createdAt(), node.clock.instant()).toMillis();
            AllocationUsage u = AllocationUsage.find(node.store, a.id()).orElseThrow();
            assertThat(u.total().heldMillis()).as("GPU-ms in the store; the ledger held it %d ms; sweep errors %s",
                    ledgerHeld, errors).isLessThanOrEqualTo(ledgerHeld);
            assertThat(errors).as("sweeps that threw").isEmpty();
        }
    }
}
