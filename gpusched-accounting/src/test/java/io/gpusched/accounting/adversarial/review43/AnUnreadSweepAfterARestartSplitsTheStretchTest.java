package io.gpusched.accounting.adversarial.review43;

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
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalDouble;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A restarted sampler's first sweep closes the downtime's gap (the meter drops the idle start: "a gap's records carry
 * no idle start"); when its next sweep cannot read the GPU's utilization (neither idle nor busy: "the meter keeps its
 * idle start too ... as the policy keeps its state"), the meter has no idle start to keep and starts a new one at the
 * sweep after, while the policy rightly keeps the stretch (flagged, warned, its count). The store now says the
 * stretch began after that sweep: IdleStatus.stretches does not continue it back across the gap (no gap record ends at
 * the new idle start), so the next restart loses the stretch's FLAGGED and WARNED steps (before that start) and its
 * count (another start), and its policy flags and warns the holder again, minutes later, and releases 8 minutes later
 * than the policy it continues would have. "A restarted sampler that sweeps as a running one would takes the same
 * steps at the same sweeps."
 */
class AnUnreadSweepAfterARestartSplitsTheStretchTest {
    @TempDir
    Path dir;

    private static AccountingSettings settings() {
        return AccountingSettings.defaults().withCheckpoint(Duration.ofMinutes(1)).withIdle(new IdlePolicy(1,
                Duration.ofMinutes(5), Duration.ofMinutes(10), Duration.ofMinutes(20), IdlePolicy.Action.RELEASE,
                "TERM", Duration.ofMinutes(8), List.of(), false, List.of()));
    }

    private static GpuMetrics unread(GpuMetrics m) {
        return new GpuMetrics(m.index(), OptionalDouble.empty(), m.memoryUsed(), m.temperatureCelsius(),
                m.powerWatts(), m.sampledAt(), m.energyMillijoules());
    }

    private static String steps(List<IdleAction> steps) {
        StringBuilder b = new StringBuilder();
        steps.forEach(a -> b.append("\n  ").append(a.at()).append(' ').append(a.action()).append(" idleFor=")
                .append(a.idleFor()));
        return b.length() == 0 ? " (none)" : b.toString();
    }

    @Test
    void theNextRestartContinuesTheWarnedStretch() {
        try (AccountingNode node = new AccountingNode(dir, settings())) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0));
            node.sweep();
            node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            List<IdleAction> before = node.run(Duration.ofSeconds(10), 6 * 11); // 11 min idle
            assertThat(before).extracting(IdleAction::action).containsExactly(IdleStep.FLAGGED, IdleStep.WARNED);
            node.stopSampler();
            node.clock.advance(Duration.ofSeconds(20));
            node.startSampler();
            List<IdleAction> mid = new ArrayList<>(node.sweep()); // closes the gap
            node.clock.advance(Duration.ofSeconds(10));
            mid.addAll(node.sweepWith(0, AnUnreadSweepAfterARestartSplitsTheStretchTest::unread)); // no utilization
            mid.addAll(node.run(Duration.ofSeconds(10), 12)); // 2 min idle: 13 min counted, 3 since the warning
            assertThat(mid).as("the running policy keeps the stretch:%s", steps(mid)).isEmpty();
            node.stopSampler();
            node.clock.advance(Duration.ofSeconds(20));
            node.startSampler();
            List<IdleAction> after = new ArrayList<>(node.sweep());
            after.addAll(node.run(Duration.ofSeconds(10), 6 * 9)); // 9 min
            assertThat(after).extracting(IdleAction::action).as("flagged and warned before the restarts, 13 min"
                    + " counted and 3 since the warning: the restarted policy continues that stretch (no second"
                    + " FLAGGED or WARNED to the holder) and releases once 20 min are counted and 8 since the"
                    + " warning; its steps:%s", steps(after)).containsExactly(IdleStep.RELEASED);
        }
    }
}
