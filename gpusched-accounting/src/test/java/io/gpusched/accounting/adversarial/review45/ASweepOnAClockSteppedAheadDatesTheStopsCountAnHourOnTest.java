package io.gpusched.accounting.adversarial.review45;

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
 * review44's fix dates the counts a stop writes by the last sweep (AccountingSampler.close:
 * {@code lastSweepMillis}), so that a stop on a clock stepped ahead no longer dates them an hour after the intervals
 * they go with. But a sweep taken on that clock, one that {@link io.gpusched.accounting.AccountingSampler#sweep}
 * skips as jumped (nothing credited, nothing written, the policy not evaluated), sets {@code lastSweepMillis} too. The
 * clock steps 1 h ahead, one sweep runs on it (skipped), the sampler is stopped and started again on the corrected
 * clock: the stop's counts are dated an hour on, after all the next sampler's counts, as in review44's test. The third
 * sampler takes that stale count (as of the first stop) and loses the 6 idle minutes the second one counted: it warns
 * about 6 minutes after the sampler that was never stopped, though both stops were planned ones.
 */
class ASweepOnAClockSteppedAheadDatesTheStopsCountAnHourOnTest {
    @TempDir
    Path dir;

    private static AccountingSettings settings() {
        return AccountingSettings.defaults().withCheckpoint(Duration.ofMinutes(1)).withIdle(new IdlePolicy(1,
                Duration.ofMinutes(5), Duration.ofMinutes(15), Duration.ofMinutes(25), IdlePolicy.Action.RELEASE,
                "TERM", Duration.ofMinutes(8), List.of(), false, List.of()));
    }

    private static Instant warned(List<IdleAction> steps) {
        return steps.stream().filter(a -> a.action() == IdleStep.WARNED).map(IdleAction::at).findFirst()
                .orElse(null);
    }

    /** Sweeps every 10 s; with {@code restarts}: after 6 min the clock steps 1 h ahead, one sweep runs on it, the
     *  sampler is stopped, the clock corrected and a sampler started; 6 min later a planned restart. */
    private static List<IdleAction> play(Path dir, boolean restarts) {
        try (AccountingNode node = new AccountingNode(dir, settings())) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0));
            node.sweep();
            node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            List<IdleAction> steps = new ArrayList<>(node.run(Duration.ofSeconds(10), 6 * 6)); // idle 6 min
            assertThat(steps).extracting(IdleAction::action).containsExactly(IdleStep.FLAGGED);
            if (restarts) {
                Instant last = node.clock.instant();
                node.clock.advance(Duration.ofHours(1)); // a wrong clock
                assertThat(node.sweep()).isEmpty(); // skipped: jumped
                node.stopSampler();
                node.clock.set(last); // corrected before the next start
                node.startSampler();
            }
            steps.addAll(node.run(Duration.ofSeconds(10), 6 * 6)); // 6 min more: 12 min, not warned yet
            assertThat(warned(steps)).isNull();
            if (restarts) {
                node.restartSampler(); // a planned stop and start, at once
            }
            for (int i = 0; i < 6 * 30 && warned(steps) == null; i++) {
                steps.addAll(node.run(Duration.ofSeconds(10), 1));
            }
            return steps;
        }
    }

    @Test
    void theThirdSamplerWarnsWhenTheOneNeverStoppedDoes() {
        Instant ranOn = warned(play(dir.resolve("ran-on"), false));
        assertThat(ranOn).isNotNull();
        List<IdleAction> restarted = play(dir.resolve("restarted"), true);
        // each restart's first sweep counts nothing (10 s each); a minute of slack besides
        assertThat(warned(restarted)).as("two planned stops (the first after one sweep on a clock 1 h ahead, which"
                + " was skipped; the clock corrected before the next start): the third sampler continues from the"
                + " second one's count at its stop, and warns within a minute of the sampler that was never stopped"
                + " (%s); its steps:%s", ranOn, restarted).isNotNull()
                .isBeforeOrEqualTo(ranOn.plus(Duration.ofMinutes(1)));
    }
}
