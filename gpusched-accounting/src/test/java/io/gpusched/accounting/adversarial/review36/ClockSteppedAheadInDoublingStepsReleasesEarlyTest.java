package io.gpusched.accounting.adversarial.review36;

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
 * "A wall clock stepped ahead (under the meter's 10-minute jump bound) delays the policy and never hastens it"
 * (docs/ACCOUNTING.md, idle policy; reviews 28, 33, 34: one 9m50s step ahead must not spend act_after). Since
 * 3f917e0d each sweep counts up to twice what the sweep before it counted (IdleWatch.observed:
 * {@code min(step, max(30 s, 2 x lastStep))}), so a clock stepped ahead a little more at each sweep is counted in full:
 * sweeps really 10 s apart, the clock stepped ahead by 20 s, 50 s, 110 s, 230 s, 470 s, 580 s at six of them (each
 * step under the 10-minute bound, each twice the one before) counts 30+60+120+240+480+590 s. Alice's GPU was idle for
 * 2 min 40 s of real sweeps when she is warned and released within the next sweep or two: act_after is 15 min and
 * grace 5 min.
 */
@Tag("adversarial")
class ClockSteppedAheadInDoublingStepsReleasesEarlyTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aClockSteppedAheadSweepAfterSweepDoesNotSpendActAfter() {
        IdlePolicy p = new IdlePolicy(1, Duration.ofMinutes(1), Duration.ofMinutes(10), Duration.ofMinutes(15),
                IdlePolicy.Action.RELEASE, "TERM", Duration.ofMinutes(5), List.of(), false, List.of());
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofMinutes(1)).withIdle(p))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0)); // idle all along
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            List<IdleAction> steps = new ArrayList<>(node.run(Duration.ofSeconds(10), 12)); // 2 min of 10-s sweeps
            int sweepsReally = 12;
            // then the clock is stepped ahead at each sweep by a little more than twice the step before
            long[] ahead = {20, 50, 110, 230, 470, 580, 580};
            for (long s : ahead) {
                node.clock.advance(Duration.ofSeconds(s)); // the step
                steps.addAll(node.run(Duration.ofSeconds(10), 1)); // the sweep, 10 s after the previous one
                sweepsReally++;
            }
            Duration real = Duration.ofSeconds(10L * sweepsReally);
            assertThat(node.scheduler.allocations()).as("alice after %s of real sweeps (idle, clock stepped ahead"
                    + " by %s s at the last %d, each under the meter's 10-min bound; act_after 15 min, grace 5 min):"
                    + " %s", real, java.util.Arrays.toString(ahead), ahead.length,
                    steps.stream().map(s -> s.at() + " " + s.action() + " " + s.detail()).toList())
                    .anyMatch(x -> x.id().equals(a.id()));
            assertThat(steps).as("released").noneMatch(s -> s.action() == IdleStep.RELEASED);
        }
    }
}
