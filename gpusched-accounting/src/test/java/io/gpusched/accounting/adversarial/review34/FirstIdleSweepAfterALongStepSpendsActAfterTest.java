package io.gpusched.accounting.adversarial.review34;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.IdlePolicy;
import io.gpusched.accounting.IdleStep;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * f1bb1d1e (review33): "the idle time the window, warn_after and act_after are judged on is observed time too, never
 * more than the wall clock". But only for an allocation IdleWatch already holds a state for: the sweep that first sees
 * it idle starts its observed time at the wall clock's ({@code s.idleObserved = wall.toMillis()} in
 * IdleWatch.evaluate), and the meter's idle start is the previous sweep ({@code tr.idleSince = from} in
 * UsageMeter.credit). So review33's own scenario, shifted by 20 s, is back: alice's job is busy (80 %) at every sweep;
 * the clock, 9 min 50 s slow, is stepped right (one sweep 9 min 50 s after the previous one, under the 10-min jump
 * bound; or the sampler stalled that long) and that sweep reads 0 %. The first idle sweep credits 9 min 50 s of idle at
 * once: she is warned 10 s of real time later and released after the 5-min grace, about 5 min 20 s of observed
 * idleness against act_after 15 min.
 */
@Tag("adversarial")
class FirstIdleSweepAfterALongStepSpendsActAfterTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void theFirstIdleSweepAfterAStepAheadDoesNotSpendActAfter() {
        IdlePolicy p = new IdlePolicy(1, Duration.ofMinutes(1), Duration.ofMinutes(10), Duration.ofMinutes(15),
                IdlePolicy.Action.RELEASE, "TERM", Duration.ofMinutes(5), List.of(), false, List.of());
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofMinutes(1)).withIdle(p))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 80)); // busy
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            List<IdleAction> steps = new ArrayList<>(node.run(Duration.ofSeconds(10), 6)); // busy 1 min
            assertThat(steps).as("steps while busy").isEmpty();
            // her job finishes its epoch; the clock (9 min 50 s slow) is stepped right at the same time: the next
            // sweep, 9 min 50 s after the previous one on the clock, is the first to read her GPU idle
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0));
            node.clock.advance(Duration.ofMinutes(9).plusSeconds(50));
            steps.addAll(node.sweep());
            int observedIdle = 10; // one sweep's worth of real time
            int releasedAfter = -1;
            for (int i = 0; i < 84 && releasedAfter < 0; i++) { // 14 more minutes, one sweep every 10 s
                steps.addAll(node.run(Duration.ofSeconds(10), 1));
                observedIdle += 10;
                if (node.scheduler.allocations().stream().noneMatch(x -> x.id().equals(a.id()))) {
                    releasedAfter = observedIdle;
                }
            }
            assertThat(releasedAfter).as("real seconds of observed idleness after which alice was released (-1: not"
                    + " within %d s; act_after 15 min); steps %s", observedIdle,
                    steps.stream().map(s -> s.at() + " " + s.action() + " " + s.detail()).toList())
                    .isEqualTo(-1);
            assertThat(steps).as("steps").noneMatch(s -> s.action() == IdleStep.RELEASED);
        }
    }
}
