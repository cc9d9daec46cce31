package io.gpusched.accounting.adversarial.accounting;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.IdlePolicy;
import io.gpusched.accounting.IdleStep;
import io.gpusched.core.Allocation;
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
 * A restarted sampler's first sweep closes the gap of its downtime and credits nothing. What it reads still counts for
 * the idle policy: a GPU busy then is busy again (the stretch ends, as at any sweep), and a sampler stopped again
 * right after that sweep leaves the stretch where it was, for the next one to continue.
 */
class RestartedSamplersFirstSweepTest {
    @TempDir
    Path dir;

    /** window 5 min, warn_after 10, act_after 20, grace 8; checkpoints every minute. */
    private static AccountingNode node(Path dir) {
        AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofMinutes(1)).withIdle(new IdlePolicy(1, Duration.ofMinutes(5),
                        Duration.ofMinutes(10), Duration.ofMinutes(20), IdlePolicy.Action.RELEASE, "TERM",
                        Duration.ofMinutes(8), List.of(), false, List.of())));
        node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0)); // idle unless a sweep says busy
        node.sweep();
        return node;
    }

    private static void restart(AccountingNode node, Duration down) {
        node.stopSampler();
        node.clock.advance(down);
        node.startSampler();
    }

    private static List<IdleStep> minutes(AccountingNode node, int minutes) {
        List<IdleStep> out = new ArrayList<>();
        for (IdleAction a : node.run(Duration.ofSeconds(10), 6 * minutes)) {
            out.add(a.action());
        }
        return out;
    }

    @Test
    void aBusyReadingAtTheFirstSweepAfterARestartEndsTheStretch() {
        try (AccountingNode node = node(dir)) {
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            assertThat(minutes(node, 12)).containsExactly(IdleStep.FLAGGED, IdleStep.WARNED);
            restart(node, Duration.ofMinutes(1));
            node.clock.advance(Duration.ofSeconds(10));
            List<IdleAction> first = node.sweepWith(0, m -> new GpuMetrics(m.index(), OptionalDouble.of(90),
                    m.memoryUsed(), m.temperatureCelsius(), m.powerWatts(), m.sampledAt(), m.energyMillijoules()));
            assertThat(first).extracting(IdleAction::action).as("the job is busy at the restarted sampler's first"
                    + " sweep").containsExactly(IdleStep.BUSY_AGAIN);
            // idle again: a new stretch, flagged and warned again, not released on the old warning (20 min of
            // idleness since the first stretch began, 8 since its warning, would release it)
            List<IdleStep> after = minutes(node, 10);
            assertThat(after).as("%s", after).containsExactly(IdleStep.FLAGGED, IdleStep.WARNED);
            assertThat(node.scheduler.allocations()).extracting(Allocation::id).contains(a.id());
        }
    }

    @Test
    void aSamplerStoppedRightAfterItsFirstSweepLeavesTheStretchToTheNext() {
        try (AccountingNode node = node(dir)) {
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("bob").build());
            assertThat(minutes(node, 12)).containsExactly(IdleStep.FLAGGED, IdleStep.WARNED);
            restart(node, Duration.ofMinutes(2));
            node.clock.advance(Duration.ofSeconds(10));
            assertThat(node.sweep()).as("the first sweep measures nothing").isEmpty();
            restart(node, Duration.ofMinutes(1));
            // 12 min idle and warned at 10: act_after 20 and the grace of 8 after the warning come 8 sampled minutes
            // on, not after a new stretch's 20
            List<IdleStep> after = minutes(node, 10);
            assertThat(after).as("%s", after).containsExactly(IdleStep.RELEASED);
            assertThat(node.scheduler.allocations()).extracting(Allocation::id).doesNotContain(a.id());
        }
    }
}
