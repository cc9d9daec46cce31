package io.gpusched.accounting.adversarial.review25;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AllocationUsage;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The node's sampler restarts (the console is restarted, an upgrade) while alice holds a GPU; it continues her
 * allocation from the store's last checkpoint (UsageMeter.resume). She releases it before the new sampler's first
 * sweep (the console's tick comes a second after it starts; the scheduler catching up with the node's ledger delivers
 * releases made while it was down at once). The release event carries its time, but UsageMeter.end, for an allocation
 * resumed and not yet swept, writes an empty interval at the checkpoint's end marked UNOBSERVED, "released ... while
 * no sampler ran": the 5 minutes from the checkpoint to the release are lost, and the record says nobody saw the
 * release that the sampler was told about. docs/ACCOUNTING.md: GPU-seconds are "grant to release, from the ledger's
 * times, per GPU: exact, sampled or not".
 */
@Tag("adversarial")
class ReleaseBeforeFirstSweepAfterRestartTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aReleaseTheRestartedSamplerIsToldOfBeforeItsFirstSweepKeepsTheTimeToTheRelease() {
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofSeconds(30)))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 60));
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            node.run(Duration.ofSeconds(10), 6); // T0+1m, checkpointed
            node.clock.advance(Duration.ofMinutes(4));
            node.restartSampler(); // at T0+5m
            node.clock.advance(Duration.ofMinutes(1));
            node.scheduler.release(a.id()); // at T0+6m, before the new sampler's first sweep
            Instant released = node.clock.instant();

            AllocationUsage u = AllocationUsage.find(node.store, a.id()).orElseThrow();
            long ledgerHeld = Duration.between(a.createdAt(), released).toMillis();
            assertThat(u.total().heldMillis()).as("GPU-ms recorded for alice (the ledger: %s to %s, %d ms); the"
                    + " record runs %s to %s and ended %s", a.createdAt(), released, ledgerHeld, u.from(), u.to(),
                    u.end()).isEqualTo(ledgerHeld);
        }
    }

    /**
     * The sibling case: bob's allocation is granted while no sampler runs (the console is stopped) and released right
     * after the sampler starts, before its first sweep. The sampler is told of the release (with its time, owner and
     * GPUs), but it has no track, no tail in the store and no grant event of it (UsageMeter.end returns nothing,
     * AccountingSampler.end finds no grant): the store gets no record of bob's allocation at all, so `report` leaves out
     * its GPU-seconds and does not count it. A sweep before the release would have recorded it from its grant.
     */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void anAllocationGrantedWhileNoSamplerRanAndReleasedBeforeTheFirstSweepIsRecorded() {
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofSeconds(30)))) {
            node.inventory.setTrace(1, UsageTrace.of(Duration.ofSeconds(10), 60));
            node.run(Duration.ofSeconds(10), 3);
            node.stopSampler(); // at T0+30s
            node.clock.advance(Duration.ofMinutes(1));
            Allocation b = node.scheduler.allocate(GpuRequest.builder().requiredDevices(1).owner("bob").build());
            node.clock.advance(Duration.ofMinutes(10));
            node.startSampler(); // at T0+11m30s
            node.clock.advance(Duration.ofMillis(500));
            node.scheduler.release(b.id()); // before the new sampler's first sweep
            Instant released = node.clock.instant();

            long ledgerHeld = Duration.between(b.createdAt(), released).toMillis();
            Optional<AllocationUsage> u = AllocationUsage.find(node.store, b.id());
            assertThat(u.map(x -> x.total().heldMillis())).as("GPU-ms recorded for bob's allocation (the ledger:"
                    + " %s to %s, %d ms); the sampler was told of its release", b.createdAt(), released, ledgerHeld)
                    .contains(ledgerHeld);
        }
    }
}
