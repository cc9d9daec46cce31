package io.gpusched.accounting.adversarial.review43;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingSettings;
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
 * 0e86d5f3: "the policy writes its count of each stretch (k: p) with every checkpoint and when the sampler stops, and a
 * restarted policy continues from it exactly ... late sweeps ... as the running policy counted them". The count is
 * written with {@code at} = the clock's time, but the intervals it goes with end at the meter's last sweep; IdleStatus
 * only takes a count whose {@code at} is not before the stretch's last idle interval's end. A planned stop while the
 * wall clock is a few seconds behind the last sweep (an NTP step back) therefore writes a count that is never used
 * (nor is any earlier one: they are all before that end), and the restarted policy falls back to re-deriving the
 * count from the checkpoint intervals: 90 s for each late sweep the running policy counted 30 s. Five such sweeps, and
 * the restarted policy warns at its second sweep where the same restart after a stop on a steady clock warns 2 min
 * later (and an uninterrupted policy 20 s before that).
 */
class AStopOnAClockSteppedBackLosesTheCountTest {
    @TempDir
    Path dir;

    private static AccountingSettings settings() {
        return AccountingSettings.defaults().withCheckpoint(Duration.ofMinutes(1)).withIdle(new IdlePolicy(1,
                Duration.ofMinutes(5), Duration.ofMinutes(10), Duration.ofMinutes(20), IdlePolicy.Action.RELEASE,
                "TERM", Duration.ofMinutes(8), List.of(), false, List.of()));
    }

    /** @return the steps after the restart; {@code warned[0]}: when it warned */
    private static List<IdleAction> play(Path dir, boolean stepBackAtStop, Instant[] lastSweep) {
        try (AccountingNode node = new AccountingNode(dir, settings())) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0));
            node.sweep(); // a checkpoint
            node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            List<IdleAction> before = new ArrayList<>();
            for (int block = 0; block < 5; block++) {
                before.addAll(node.run(Duration.ofSeconds(10), 6)); // the 6th: a checkpoint
                before.addAll(node.run(Duration.ofSeconds(240), 1)); // late (under the jump bound): a checkpoint;
                // the running policy counts it 30 s
            }
            before.addAll(node.run(Duration.ofSeconds(10), 3)); // no checkpoint: 8 min counted in all
            assertThat(before).extracting(IdleAction::action).containsExactly(IdleStep.FLAGGED);
            lastSweep[0] = node.clock.instant();
            if (stepBackAtStop) {
                node.clock.set(lastSweep[0].minusSeconds(5)); // the wall clock stepped back 5 s
            }
            node.stopSampler(); // a planned stop: its last checkpoint and the policy's count are written
            node.clock.set(lastSweep[0].plusSeconds(20));
            node.startSampler();
            List<IdleAction> after = new ArrayList<>(node.sweep());
            for (int i = 0; i < 30 && after.stream().noneMatch(a -> a.action() == IdleStep.WARNED); i++) {
                after.addAll(node.run(Duration.ofSeconds(10), 1));
            }
            return after;
        }
    }

    private static Instant warned(List<IdleAction> steps) {
        return steps.stream().filter(a -> a.action() == IdleStep.WARNED).map(IdleAction::at).findFirst()
                .orElse(null);
    }

    @Test
    void aStopWhileTheClockIsAFewSecondsBehindStillContinuesFromTheCount() {
        Instant[] steadyLast = new Instant[1];
        Instant steady = warned(play(dir.resolve("steady"), false, steadyLast));
        Instant[] backLast = new Instant[1];
        List<IdleAction> back = play(dir.resolve("back"), true, backLast);
        assertThat(steadyLast[0]).isEqualTo(backLast[0]);
        // 8 min counted before the stop, 2 more after the restart's first sweep: warned 2 min 20 s after the stop
        assertThat(steady).isEqualTo(steadyLast[0].plus(Duration.ofSeconds(140)));
        assertThat(warned(back)).as("the same sweeps and the same restart, the stop 5 s behind the last sweep on the"
                + " wall clock: the restarted policy continues from the count written at the stop (8 min) and warns"
                + " at %s, as after a stop on a steady clock; it re-derived 13 min from the intervals (each late"
                + " sweep 90 s, not the 30 s counted) and warned at:%s", steady, back).isEqualTo(steady);
    }
}
