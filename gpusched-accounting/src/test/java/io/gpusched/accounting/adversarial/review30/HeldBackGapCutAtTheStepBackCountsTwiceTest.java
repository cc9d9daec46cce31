package io.gpusched.accounting.adversarial.review30;

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
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * fix28's held-back restart gap (UsageMeter.observe, {@code t < tr.pendingTo}): when a later sweep comes before the
 * restart's first sweep (the clock was ahead), the gap is written "up to that sweep" ({@code pendingGap(tr, t)}). But
 * the sweeps between the restart and the step back (9 min of real time, sampled under the clock that was ahead) were
 * already credited and checkpointed as intervals after the restart's first sweep: the gap, cut at the step-back
 * sweep's (true) time, covers that same real time again. The record then holds more than the time that passed while
 * alice held her GPU ("never more", docs/ACCOUNTING.md, clock steps; "never counted twice"). The true time of the
 * restart's first sweep is the step-back sweep's time less the sweep time since ({@code pendingSwept}).
 *
 * <p><b>Judged</b> (fix30): the hold-back is reverted (docs/ACCOUNTING.md "Not sampled"), so nothing is counted twice:
 * the restart's gap is written once, at the first sweep, and the sweeps after it are credited once. What remains here
 * is the clock's lead at the restart (an hour), which the gap, measured by the wall clock, records once and a later
 * step back cannot take back (the store is append-only); the same judgement as review28's RestartUnderAClockAheadTest,
 * and
 * the same mitigation (the shipped unit starts the service {@code After=time-sync.target}). This test asserts the
 * documented behaviour: the lead recorded once, never twice (the 9 minutes sampled under the clock that was ahead
 * are not counted again), and no more GPU time than the stepped clock read from the grant to the release.
 */
@Tag("adversarial")
class HeldBackGapCutAtTheStepBackCountsTwiceTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aGapCutAtAClockStepBackDoesNotCoverTheTimeSampledAfterTheRestartAgain() {
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofSeconds(30)))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 80));
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            node.run(Duration.ofSeconds(10), 30); // 5 min
            node.stopSampler(); // a planned stop (a reboot)
            Instant trueRestart = node.clock.instant().plus(Duration.ofMinutes(30)); // down 30 min
            Duration lead = Duration.ofHours(1);
            node.clock.set(trueRestart.plus(lead)); // the RTC reads an hour ahead at boot
            node.startSampler();
            node.run(Duration.ofSeconds(10), 54); // 9 min of sweeps under the clock that is ahead
            node.clock.set(trueRestart.plus(Duration.ofMinutes(9))); // NTP steps it back to the true time
            node.run(Duration.ofSeconds(10), 6);
            node.scheduler.release(a.id());
            Instant released = node.clock.instant();

            AllocationUsage u = AllocationUsage.find(node.store, a.id()).orElseThrow();
            Duration ledger = Duration.between(a.createdAt(), released); // both read from the true clock
            assertThat(Duration.ofMillis(u.total().heldMillis())).as("GPU time recorded for alice's 1 GPU; the ledger"
                    + " says granted %s, released %s (%s, all of it real time: the clock was true at both); the"
                    + " clock's lead %s is recorded once, never twice; %s", a.createdAt(), released, ledger, lead,
                    u.verdict())
                    .isGreaterThanOrEqualTo(lead)
                    .isLessThanOrEqualTo(ledger.plus(lead).plusMinutes(1));
        }
    }
}
