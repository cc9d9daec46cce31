package io.gpusched.accounting.adversarial.review44;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.IdlePolicy;
import io.gpusched.accounting.IdleStep;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalDouble;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * AccountingSampler.close dates its counts max(clock, last sweep) (7a9ca06f), and IdleStatus.stretches takes the
 * count of the stretch with the latest date. A stop while the wall clock is stepped ahead (here 1 h, corrected before
 * the next start, as NTP does at boot) dates the stop's count an hour after the intervals it goes with. The next
 * sampler runs normally on the right clock (the store's intervals end at the last sweep, so it judges at once) and
 * writes its own counts with every checkpoint and at its stop, all dated before that stale count. Every sampler
 * started in the following hour takes the stale count (the idle time as of the first stop) and counts nothing after
 * it (no interval ends after its date): the 6 idle minutes the second sampler counted are lost, though it was stopped
 * cleanly, and the third sampler warns about 6 minutes after the sampler that was never stopped (the second sampler
 * alone, run on, warns with it: it is the count, not the clock, that is wrong). The same stale count also stands in
 * for "a count of the stretch at or after the trailing gap's end", so a busy first sweep of the next sampler is
 * counted through and the policy flags sooner (second test). Dating the stop's counts by the last sweep, as the
 * intervals are, would do for both.
 */
class AStopOnAClockSteppedAheadHidesTheNextSamplersCountTest {
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

    /**
     * Sweeps every 10 s; {@code stops} 1: stopped (clock 1 h ahead) after 6 min, started at once on the corrected
     * clock; 2: and stopped and started again 6 min later.
     */
    private static List<IdleAction> play(Path dir, int stops) {
        boolean restarts = stops > 0;
        try (AccountingNode node = new AccountingNode(dir, settings())) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0));
            node.sweep();
            node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            List<IdleAction> steps = new ArrayList<>(node.run(Duration.ofSeconds(10), 6 * 6)); // idle 6 min
            assertThat(steps).extracting(IdleAction::action).containsExactly(IdleStep.FLAGGED);
            if (restarts) {
                Instant last = node.clock.instant();
                node.clock.advance(Duration.ofHours(1)); // a wrong clock at the stop
                node.stopSampler();
                node.clock.set(last); // corrected before the next start
                node.startSampler();
            }
            steps.addAll(node.run(Duration.ofSeconds(10), 6 * 6)); // 6 min more: 12 min, not warned yet
            assertThat(warned(steps)).isNull();
            if (stops > 1) {
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
        Instant ranOn = warned(play(dir.resolve("ran-on"), 0));
        assertThat(ranOn).isNotNull();
        // the second sampler alone counts as the running one does (its first sweep counts nothing: 10 s later)
        assertThat(warned(play(dir.resolve("stopped-once"), 1))).isNotNull()
                .isBeforeOrEqualTo(ranOn.plus(Duration.ofSeconds(30)));
        List<IdleAction> restarted = play(dir.resolve("restarted"), 2);
        // each restart's first sweep counts nothing (10 s each); a minute of slack besides
        assertThat(warned(restarted)).as("two planned stops (the first on a clock 1 h ahead, corrected before the next"
                + " start): the third sampler continues from the second one's count at its stop, and warns within a"
                + " minute of the sampler that was never stopped (%s); its steps:%s", ranOn, restarted).isNotNull()
                .isBeforeOrEqualTo(ranOn.plus(Duration.ofMinutes(1)));
    }

    private static GpuMetrics busy(GpuMetrics m) {
        return new GpuMetrics(m.index(), OptionalDouble.of(95), m.memoryUsed(), m.temperatureCelsius(),
                m.powerWatts(), m.sampledAt(), m.energyMillijoules());
    }

    private static Instant flagged(List<IdleAction> steps) {
        return steps.stream().filter(a -> a.action() == IdleStep.FLAGGED).map(IdleAction::at).findFirst()
                .orElse(null);
    }

    /**
     * The stale count also satisfies the trailing-gap rule (a count of the stretch at or after the gap's end): idle 4
     * min, stopped on a clock 1 h ahead; the next sampler (clock corrected, 20 s later) reads GPU 0 busy at its first
     * sweep (not flagged: no BUSY_AGAIN, no count) and is stopped; the one after it continues the 4 idle minutes
     * across that busy sweep and flags about 4 min sooner than the sampler that ran on.
     */
    @Test
    void aBusyFirstSweepAfterAStopOnAClockAheadEndsTheStretch() {
        Instant busyAt = null;
        Instant ranOn = null;
        Instant restarted = null;
        List<IdleAction> steps = null;
        for (boolean restarts : new boolean[]{false, true}) {
            try (AccountingNode node = new AccountingNode(dir.resolve(restarts ? "busy-restarted" : "busy-ran-on"),
                    settings())) {
                node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0));
                node.sweep();
                node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
                assertThat(node.run(Duration.ofSeconds(10), 6 * 4)).isEmpty(); // idle 4 min, not flagged
                Instant last = node.clock.instant();
                if (restarts) {
                    node.clock.advance(Duration.ofHours(1));
                    node.stopSampler();
                    node.clock.set(last);
                }
                node.clock.advance(Duration.ofSeconds(20));
                if (restarts) {
                    node.startSampler();
                }
                busyAt = node.clock.instant();
                assertThat(node.sweepWith(0, AStopOnAClockSteppedAheadHidesTheNextSamplersCountTest::busy)).isEmpty();
                if (restarts) {
                    node.stopSampler();
                }
                node.clock.advance(Duration.ofSeconds(20));
                if (restarts) {
                    node.startSampler();
                }
                steps = new ArrayList<>(node.sweep());
                for (int i = 0; i < 60 && flagged(steps) == null; i++) {
                    steps.addAll(node.run(Duration.ofSeconds(10), 1));
                }
                if (restarts) {
                    restarted = flagged(steps);
                } else {
                    ranOn = flagged(steps);
                }
            }
        }
        assertThat(ranOn).isNotNull().isAfterOrEqualTo(busyAt.plus(Duration.ofMinutes(5)));
        assertThat(restarted).as("GPU 0 read busy at %s, the first sweep of the sampler started after a stop on a"
                + " clock 1 h ahead; the sampler after it must not count the 4 idle minutes before that sweep: expected"
                + " flagged no sooner than the sampler that ran on (%s); its steps:%s", busyAt, ranOn, steps)
                .isNotNull().isAfterOrEqualTo(ranOn);
    }
}
