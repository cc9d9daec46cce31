package io.gpusched.accounting.adversarial.review30;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AllocationUsage;
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
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * docs/ACCOUNTING.md, "Writes": the scheduler's {@code release} (and {@code allocate}) may return before the sampler
 * gets the event, "when another thread is still delivering earlier events (behind a slow listener)", in order. The
 * console sweeps every second meanwhile, from the scheduler's list. Carol's allocation is granted and released while
 * delivery is held up behind a slow listener for 6 sweeps: the sweeps track her from her grant and, once she is gone
 * from the list, end her record UNOBSERVED at her last sweep (UsageMeter.endVanished). Then her events arrive, in
 * order: the grant is taken as one "no sweep has seen yet" (AccountingSampler.end: {@code granted.put} checks only
 * the tracked ids, not the ids the meter ended, which fix28 forgets two sweeps later anyway), and the
 * release writes a second record of her whole allocation from it (UsageMeter.unsampled). Her 30 s are recorded twice,
 * with two ends.
 */
@Tag("adversarial")
class EventsHeardLateCountTwiceTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aGrantAndReleaseDeliveredAfterTheSweepsEndedTheAllocationAreNotRecordedAgain() {
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofSeconds(30)))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 80));
            // events reach the sampler behind a slow listener: held here, delivered later in their order
            node.scheduler.removeListener(node.sampler);
            List<AllocationEvent> held = new CopyOnWriteArrayList<>();
            node.scheduler.addListener(held::add);
            node.sweep();
            Allocation c = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("carol").build());
            node.run(Duration.ofSeconds(10), 3);
            node.scheduler.release(c.id());
            Instant released = node.clock.instant();
            node.run(Duration.ofSeconds(10), 3); // the sweeps go on while delivery is held up
            List<AllocationEvent> late = new ArrayList<>(held);
            assertThat(late).as("carol's events, held up").extracting(AllocationEvent::type)
                    .contains(AllocationEvent.Type.ALLOCATED, AllocationEvent.Type.RELEASED);
            for (AllocationEvent e : late) { // delivery catches up
                node.sampler.onEvent(e);
            }
            node.run(Duration.ofSeconds(10), 1);

            AllocationUsage u = AllocationUsage.find(node.store, c.id()).orElseThrow();
            Duration ledger = Duration.between(c.createdAt(), released);
            assertThat(Duration.ofMillis(u.total().heldMillis())).as("GPU time recorded for carol's 1 GPU; the ledger"
                    + " says granted %s, released %s (%s); %s, ended %s", c.createdAt(), released, ledger,
                    u.verdict(), u.end()).isLessThanOrEqualTo(ledger.plusSeconds(10));
        }
    }
}
