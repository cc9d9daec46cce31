package io.gpusched.accounting.adversarial.review28;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.UsageReport;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationEvent;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * b4813444's {@code ended} set (UsageMeter) keeps only the newest 4096 ids it ended (ENDED_KEPT). The race it guards
 * (a sweep's live list read before a release; the sweep credited after it) is not bounded by how many releases come in
 * between: on a node with short allocations (a service handing out GPUs per request), a sweep thread that is
 * descheduled between reading the list and taking the sampler's monitor lets more than 4096 releases through. Alice's
 * id is then forgotten, and the stale list starts her allocation again from its grant (UsageMeter.start: no tail, so
 * {@code from = createdAt}, first): her time is written a second time (the gap from her grant), then ended UNOBSERVED
 * at the next sweep. The report by allocation shows her 2-minute allocation held twice as long as the ledger says.
 * The releases in between are delivered as the scheduler would deliver other allocations' releases (events for
 * allocations the sampler never swept), so no 4096 records need to be forced to disk.
 */
@Tag("adversarial")
class EndedIdsForgottenTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aStaleLiveListDoesNotStartAnEndedAllocationAgainAfterManyReleases() {
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofSeconds(30)))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 80));
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            node.run(Duration.ofSeconds(10), 12);
            List<Allocation> stale = node.scheduler.allocations(); // the sweep thread reads the live list ...
            node.scheduler.release(a.id()); // ... alice's allocation is released, her record written ...
            Instant released = node.clock.instant();
            List<AllocationEvent> others = new ArrayList<>(); // ... and 4,100 short allocations' releases
            for (int i = 0; i < 4_100; i++) {
                others.add(new AllocationEvent(AllocationEvent.Type.RELEASED, released, Optional.of("short-" + i),
                        Optional.of("svc"), Optional.empty(), List.of("GPU-review-1"), Optional.empty(), "short"));
            }
            node.sampler.onEvents(others);
            node.clock.advance(Duration.ofSeconds(10));
            node.sampler.sweep(node.inventory.sample(), stale); // the sweep with the list it read
            node.run(Duration.ofSeconds(10), 6);

            UsageReport r = UsageReport.of(node.store, AccountingNode.T0, node.clock.instant().plusSeconds(1),
                    UsageReport.GroupBy.ALLOCATION);
            UsageReport.Row row = r.rows().stream().filter(x -> x.key().equals(a.id())).findFirst().orElseThrow();
            Duration ledger = Duration.between(a.createdAt(), released);
            assertThat(Duration.ofMillis(row.figures().heldMillis())).as("GPU time recorded for alice's allocation"
                    + " (ledger: %s to %s); its end: %s", a.createdAt(), released, row.end())
                    .isLessThanOrEqualTo(ledger);
        }
    }
}
