package io.gpusched.accounting.adversarial.review28;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AllocationUsage;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationEvent;
import io.gpusched.core.AllocationListener;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuSample;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The same race as ReleaseHeardAfterALaterSweepTest (the sweep's live list read before a release, its event delivered
 * after the sweep), when that sweep is also a checkpoint: the checkpoint writes alice's interval up to the sweep's
 * time, past her release, and UsageMeter.end can no longer cut it back (the store is append-only; {@code keep =
 * max(0, r - tr.from)} is 0, so her release record is a point at the checkpoint). Her record then says she held her
 * GPU 30 s and was released at the checkpoint, where the ledger says 25 s: GPU-seconds above grant-to-release by up to
 * one sweep, for every release that loses this race on a checkpoint sweep (with 1 s sweeps and 60 s checkpoints, one
 * release in sixty that comes while the sweep runs). The issue: "GPU-seconds never exceed wall time x GPUs held".
 *
 * <p>Judged, not fixed in the sampler (fix28). The sampler cannot tell a list read before a release it has not heard
 * of from a current one; the only cure in the sampler is a checkpoint that writes up to the sweep before it (tried:
 * this scenario then passes), and that breaks the kept contract that the store lags a running allocation by less than
 * one checkpoint and that a checkpoint holds the sweep it was taken at (ScriptedTraceReportTest
 * whileAnAllocationRunsTheStoreLagsAtMostOneCheckpoint, FullDiskTest aSweepWithNothingOfItsOwnStillWritesWhatWasRefused,
 * AccountingStoreTest statusShowsAnIdleAllocationFromTheStore all failed). Every host takes the sweep's sample (its
 * time) before it reads the live list (NodeWatcher.tick: inventory.sample() then pushState; RunSampler and DemoUsage:
 * {@code sampler.sweep(inventory.sample(), scheduler.allocations())}, arguments evaluated left to right), so a release
 * the list misses comes at or after the sweep's time and UsageMeter.end records it exactly; AccountingSampler.sweep and
 * docs/ACCOUNTING.md ("Writes") now state that order as the contract, and the bound that remains (a release another
 * process wrote to the ledger between the host's catch-up and its sample). This test asserts the documented behaviour:
 * with the sample taken before the list, as hosts do, a release the checkpoint sweep's list missed is not overcharged.
 */
@Tag("adversarial")
class ReleaseRacingACheckpointTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aCheckpointTakenWithAListReadBeforeAReleaseDoesNotChargeTimeAfterItInTheHostsOrder() {
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofSeconds(30)))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 80));
            node.sweep(); // a checkpoint (the sampler's first sweep)
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            node.run(Duration.ofSeconds(10), 2);

            node.clock.set(a.createdAt().plusSeconds(30));
            GpuSample sample = node.inventory.sample(); // the tick takes the sweep's sample (its time) ...
            List<Allocation> live = node.scheduler.allocations(); // ... then reads the live list ...
            List<AllocationEvent> held = new CopyOnWriteArrayList<>();
            AllocationListener later = held::add;
            node.scheduler.removeListener(node.sampler);
            node.scheduler.addListener(later);
            node.clock.set(a.createdAt().plusSeconds(31));
            node.scheduler.release(a.id()); // ... alice's allocation is released on another thread ...
            Instant released = node.clock.instant();
            node.scheduler.removeListener(later);
            node.scheduler.addListener(node.sampler);
            node.sampler.sweep(sample, live); // ... the sweep, 30 s after the last checkpoint: a checkpoint
            assertThat(held).as("events of the release").isNotEmpty();
            node.sampler.onEvents(held); // ... and the release's event, after it

            AllocationUsage u = AllocationUsage.find(node.store, a.id()).orElseThrow();
            Duration ledger = Duration.between(a.createdAt(), released);
            assertThat(Duration.ofMillis(u.total().heldMillis())).as("GPU time recorded for alice's 1 GPU (ledger:"
                    + " granted %s, released %s); the record's end: %s at %s", a.createdAt(), released, u.end(),
                    u.to()).isLessThanOrEqualTo(ledger);
        }
    }
}
