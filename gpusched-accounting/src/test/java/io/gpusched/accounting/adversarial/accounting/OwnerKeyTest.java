package io.gpusched.accounting.adversarial.accounting;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.UsageReport;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code gpusched report --by owner}: an owner literally named {@code -} (a valid owner) and allocations without an
 * owner are two populations; the report must not add one's GPU time to the other's.
 */
@Tag("adversarial")
class OwnerKeyTest {
    @TempDir
    Path dir;

    @Test
    void anOwnerNamedDashIsNotMergedWithAllocationsWithoutOwner() {
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofSeconds(30)))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 50));
            node.inventory.setTrace(1, UsageTrace.of(Duration.ofSeconds(10), 50));
            node.sweep();
            Allocation dash = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("-").build());
            Allocation none = node.scheduler.allocate(GpuRequest.builder().requiredDevices(1).build());
            node.run(Duration.ofMinutes(1), 5);
            node.scheduler.release(dash.id());
            node.scheduler.release(none.id());
            UsageReport r = UsageReport.of(node.store, AccountingNode.T0, node.clock.instant(),
                    UsageReport.GroupBy.OWNER);
            assertThat(r.rows()).as("rows of the report by owner: %s", r.rows().stream().map(UsageReport.Row::key)
                    .toList()).hasSize(2);
        }
    }
}
