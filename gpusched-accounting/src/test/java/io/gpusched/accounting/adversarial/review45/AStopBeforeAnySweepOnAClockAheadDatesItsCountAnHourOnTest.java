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
 * review44's fix dates the counts a stop writes by the last sweep, "whatever the clock says then" (docs/ACCOUNTING.md),
 * but a sampler that never swept still dates them by the clock (AccountingSampler.close: {@code lastSweepMillis < 0}),
 * and such a sampler holds the counts it resumed from the store, so it writes them again. A sampler started on a clock
 * 1 h ahead (an RTC at boot, before NTP steps it) and stopped before its first sweep (a start that failed later, a
 * console closed at once) writes each stretch's count dated an hour on; the clock is corrected and the next sampler
 * runs normally, its counts all dated before that one. The sampler after it takes the stale count (as of the first
 * stop) and loses the 6 idle minutes the one before counted: it warns about 6 minutes after the sampler never stopped,
 * as in review44's test.
 */
class AStopBeforeAnySweepOnAClockAheadDatesItsCountAnHourOnTest {
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

    /** Sweeps every 10 s; with {@code restarts}: after 6 min the sampler is stopped, one is started and stopped on a
     *  clock 1 h ahead before it sweeps, the clock corrected and a sampler started; 6 min later a planned restart. */
    private static List<IdleAction> play(Path dir, boolean restarts) {
        try (AccountingNode node = new AccountingNode(dir, settings())) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0));
            node.sweep();
            node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            List<IdleAction> steps = new ArrayList<>(node.run(Duration.ofSeconds(10), 6 * 6)); // idle 6 min
            assertThat(steps).extracting(IdleAction::action).containsExactly(IdleStep.FLAGGED);
            if (restarts) {
                Instant last = node.clock.instant();
                node.stopSampler();
                node.clock.advance(Duration.ofHours(1)); // a wrong clock at the next start
                node.startSampler();
                node.stopSampler(); // before its first sweep
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
    void theSamplerAfterThePlannedRestartWarnsWhenTheOneNeverStoppedDoes() {
        Instant ranOn = warned(play(dir.resolve("ran-on"), false));
        assertThat(ranOn).isNotNull();
        List<IdleAction> restarted = play(dir.resolve("restarted"), true);
        // each restart's first sweep counts nothing (10 s each); a minute of slack besides
        assertThat(warned(restarted)).as("a sampler started and stopped on a clock 1 h ahead before its first"
                + " sweep, between two that ran normally; the clock corrected before the next start; then a planned"
                + " restart: the sampler after it continues from the"
                + " count written at that stop, and warns within a minute of the sampler that was never stopped"
                + " (%s); its steps:%s", ranOn, restarted).isNotNull()
                .isBeforeOrEqualTo(ranOn.plus(Duration.ofMinutes(1)));
    }
}
