package io.gpusched.accounting.adversarial.review48;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingSampler;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.HostIdleEffects;
import io.gpusched.accounting.IdlePolicy;
import io.gpusched.accounting.IdleStep;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * docs/ACCOUNTING.md: each sweep counts at most 30 s or twice the cadence (a wall clock stepped ahead under the jump
 * bound "delays the policy rather than hastens it"); "while the clock is behind a sweep already judged, the policy
 * judges nothing"; and a sampler killed at any point "never flags, warns or acts sooner than the sampler that ran on".
 * Review46's fix (IdleWatch.resumedJudged) makes a restarted policy's first sweep behind the latest <em>count</em> it
 * resumed from a step back, but the count is dated by the last checkpoint, not by the last sweep its predecessor judged.
 * Here, with 5-minute checkpoints and sweeps every 10 s, the wall clock is stepped 3 minutes ahead at the sweep after a
 * checkpoint C (an NTP step, under the 10-minute jump bound: the running policy counts 30 s of it), then back 170 s, to
 * C + 10 s; the sampler is killed there (before the next checkpoint, so the store knows nothing after C). The sampler
 * that ran on judges nothing until its clock passes C + 3 min again. The killed one's successor, sweeping when the one
 * that ran on does, takes C as the latest judged sweep and counts every 10-s sweep from C + 20 s to C + 3 min again:
 * 160 s where the running policy counted 30 s, and it flags about two minutes sooner.
 */
class AKillBehindAClockThatWasAheadCountsItsTimeAgainTest {
    @TempDir
    Path dir;

    /** window 8 min (the allocation is idle 5 min at C), warn_after 20, act_after 40; checkpoints every 5 min. */
    private static AccountingSettings settings() {
        return AccountingSettings.defaults().withCheckpoint(Duration.ofMinutes(5)).withIdle(new IdlePolicy(1,
                Duration.ofMinutes(8), Duration.ofMinutes(20), Duration.ofMinutes(40), IdlePolicy.Action.RELEASE,
                "TERM", Duration.ofMinutes(8), List.of(), false, List.of()));
    }

    /** @return when the allocation was first flagged (null: never, in 15 minutes of sweeps after the step back) */
    private static Instant firstFlagged(Path dir, boolean kill, List<IdleAction> all) {
        AccountingSettings settings = settings();
        try (AccountingNode node = new AccountingNode(dir, settings)) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0)); // idle throughout
            node.sweep(); // T0: the first checkpoint
            node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            all.addAll(node.run(Duration.ofSeconds(10), 30)); // idle 5 min: C = T0 + 5 min, a checkpoint
            all.addAll(node.run(Duration.ofMinutes(3), 1)); // the clock stepped 3 min ahead: C + 3 min (30 s counted)
            node.clock.advance(Duration.ofSeconds(-170)); // and back: C + 10 s, behind the last sweep judged
            all.addAll(node.sweep());
            if (kill) { // kill -9 now; the next sampler sweeps when the one that ran on would, 10 s later
                AccountingStore copy = node.killedCopy(dir.resolve("killed"));
                node.scheduler.removeListener(node.sampler);
                node.sampler = AccountingSampler.open(copy, settings, node.inventory, node.attribution,
                        new HostIdleEffects(node.scheduler), node.clock).orElseThrow();
                node.scheduler.addListener(node.sampler);
                node.sampler.knownLive(node.scheduler.allocations());
            }
            for (int i = 0; i < 6 * 15; i++) {
                all.addAll(node.run(Duration.ofSeconds(10), 1));
                Instant f = all.stream().filter(a -> a.action() == IdleStep.FLAGGED).map(IdleAction::at).findFirst()
                        .orElse(null);
                if (f != null) {
                    return f;
                }
            }
            return null;
        }
    }

    @Test
    void theKilledSamplerFlagsNoSoonerThanTheOneThatRanOn() {
        List<IdleAction> ranOnSteps = new ArrayList<>();
        Instant ranOn = firstFlagged(dir.resolve("ran-on"), false, ranOnSteps);
        assertThat(ranOn).as("the sampler that ran on flags: %s", ranOnSteps).isNotNull();
        List<IdleAction> killedSteps = new ArrayList<>();
        Instant killed = firstFlagged(dir.resolve("killed"), true, killedSteps);
        assertThat(killed).as("idle 5 min to a checkpoint C (sweeps every 10 s, checkpoints every 5 min), the clock"
                + " stepped 3 min ahead for one sweep (the running policy counts 30 s of it) and back to C + 10 s, the"
                + " sampler killed there and continued by one sweeping when the one that ran on does: expected flagged"
                + " no sooner than the sampler that ran on (%s), which judges nothing until its clock passes C + 3 min"
                + " again; the killed run counted the 3 min again and flagged at %s; its steps: %s",
                ranOn, killed, killedSteps)
                .isNotNull().isAfterOrEqualTo(ranOn);
    }
}
