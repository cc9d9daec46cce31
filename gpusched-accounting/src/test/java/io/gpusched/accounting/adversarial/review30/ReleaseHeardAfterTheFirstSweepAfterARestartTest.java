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
 * AccountingSampler.knownLive (review25): every allocation live when a sampler starts that it does not track yet is
 * kept as "granted, not yet swept", from its grant, even one the store already has records of (it checks the tracked
 * ids only, not the store's open tails). Alice's allocation has 5 minutes on record when the console restarts; it is
 * released right after the new sampler began to listen, and the release's event reaches the sampler behind a slow
 * listener ("release may return before the sampler gets the event", docs/ACCOUNTING.md "Writes") after the first
 * sweep. That sweep ends her resumed record UNOBSERVED (UsageMeter.endResumedNotLive); the late release then finds no
 * track and no tail, takes the knownLive entry, and writes her whole allocation again from its grant
 * (UsageMeter.unsampled): her 6 minutes are recorded as 11, with two ends.
 */
@Tag("adversarial")
class ReleaseHeardAfterTheFirstSweepAfterARestartTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aReleaseHeardAfterTheRestartsFirstSweepDoesNotRecordTheAllocationAgainFromItsGrant() {
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofSeconds(30)))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 80));
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            node.run(Duration.ofSeconds(10), 30); // 5 min on record
            node.stopSampler(); // the console restarts
            node.clock.advance(Duration.ofMinutes(1));
            node.startSampler(); // listens, and is told the live allocations
            // events now reach the sampler behind a slow listener: held here, delivered later in their order
            node.scheduler.removeListener(node.sampler);
            List<AllocationEvent> held = new CopyOnWriteArrayList<>();
            node.scheduler.addListener(held::add);
            node.scheduler.release(a.id());
            Instant released = node.clock.instant();
            node.run(Duration.ofSeconds(10), 1); // the restart's first sweep: alice is not live
            for (AllocationEvent e : new ArrayList<>(held)) { // delivery catches up
                node.sampler.onEvent(e);
            }
            node.run(Duration.ofSeconds(10), 1);

            AllocationUsage u = AllocationUsage.find(node.store, a.id()).orElseThrow();
            Duration ledger = Duration.between(a.createdAt(), released);
            assertThat(Duration.ofMillis(u.total().heldMillis())).as("GPU time recorded for alice's 1 GPU; the ledger"
                    + " says granted %s, released %s (%s); %s, ended %s", a.createdAt(), released, ledger,
                    u.verdict(), u.end()).isLessThanOrEqualTo(ledger.plusSeconds(10));
        }
    }
}
