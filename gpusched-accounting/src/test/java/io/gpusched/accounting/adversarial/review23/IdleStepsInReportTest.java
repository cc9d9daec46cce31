package io.gpusched.accounting.adversarial.review23;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.IdlePolicy;
import io.gpusched.accounting.IdleStep;
import io.gpusched.accounting.ReportViews;
import io.gpusched.accounting.UsageReport;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The report attaches an idle step to its allocation's (or owner's) row only when that row already exists as the step
 * is read (UsageReport.Builder.action: {@code rows.containsKey(key)}). A step is written at the sweep that takes it;
 * the interval covering that sweep is written at the next checkpoint, after it. So an allocation flagged and warned
 * within its first checkpoint interval (window 1 min, warn_after 2 min, checkpoint 5 min: a valid configuration) shows
 * in `report --by allocation` with no idle mark, though the report's own idle list holds both steps.
 */
@Tag("adversarial")
class IdleStepsInReportTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void anAllocationFlaggedBeforeItsFirstCheckpointIsMarkedIdleInItsRow() {
        IdlePolicy p = new IdlePolicy(1, Duration.ofMinutes(1), Duration.ofMinutes(2), Duration.ofMinutes(2),
                IdlePolicy.Action.WARN, "TERM", Duration.ofMinutes(1), List.of(), false, List.of());
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofMinutes(5)).withIdle(p))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0));
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            node.run(Duration.ofSeconds(10), 60); // 10 minutes idle: flagged at 1 min, warned at 2
            node.sampler.checkpoint();
            UsageReport r = UsageReport.of(node.store, AccountingNode.T0, node.clock.instant().plusSeconds(1),
                    UsageReport.GroupBy.ALLOCATION);
            assertThat(r.idle()).as("the report's idle steps").anyMatch(s -> s.allocationId().equals(a.id())
                    && s.action() == IdleStep.FLAGGED);
            UsageReport.Row row = r.rows().stream().filter(x -> x.key().equals(a.id())).findFirst().orElseThrow();
            assertThat(row.idleSteps()).as("alice's row's idle steps; the report:%n%s", ReportViews.text(r))
                    .contains(IdleStep.FLAGGED, IdleStep.WARNED);
        }
    }
}
