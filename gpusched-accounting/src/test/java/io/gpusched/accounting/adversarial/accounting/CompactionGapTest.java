package io.gpusched.accounting.adversarial.accounting;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.AllocationUsage;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import java.time.LocalDate;
import java.time.ZoneOffset;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Compaction ("rewritten as one interval per allocation") must not change what a record says. An allocation of 22
 * minutes whose sampler was restarted once (2 minutes nobody sampled, a {@code gap}) reports 2 minutes unsampled
 * before compaction; after it, the same allocation must still report 2 minutes, not its whole time.
 */
@Tag("adversarial")
class CompactionGapTest {
    @TempDir
    Path dir;

    @Test
    void compactionKeepsTheUnsampledTimeOfAnAllocationWithOneShortGap() {
        Allocation a;
        long gapsBefore;
        long heldBefore;
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofSeconds(30)))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 70));
            node.sweep();
            a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            node.run(Duration.ofMinutes(1), 10);
            node.stopSampler(); // the console restarts: 2 minutes nobody samples
            node.clock.advance(Duration.ofMinutes(2));
            node.startSampler();
            node.sweep();
            node.run(Duration.ofMinutes(1), 10);
            node.scheduler.release(a.id());
            AllocationUsage before = AllocationUsage.find(node.store, a.id()).orElseThrow();
            gapsBefore = before.gaps();
            heldBefore = before.total().heldMillis();
            assertThat(gapsBefore).as("2 minutes not sampled, before compaction").isEqualTo(120_000);
            assertThat(heldBefore).isEqualTo(22 * 60_000);
        }
        AccountingStore store = AccountingStore.at(dir);
        try (AccountingStore.Writer w = store.openWriter().orElseThrow()) {
            w.compact(LocalDate.ofInstant(AccountingNode.T0, ZoneOffset.UTC));
        }
        AllocationUsage after = AllocationUsage.find(store, a.id()).orElseThrow();
        assertThat(after.total().heldMillis()).isEqualTo(heldBefore);
        assertThat(after.gaps()).as("unsampled ms after compaction (report ID's unsampledSeconds)")
                .isEqualTo(gapsBefore);
    }
}
