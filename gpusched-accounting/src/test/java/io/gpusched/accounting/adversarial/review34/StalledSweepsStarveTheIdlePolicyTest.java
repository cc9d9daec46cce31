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
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Idle allocations are "warned, then acted on at the configured times" (issue 34; docs/ACCOUNTING.md, idle policy).
 * Since f1bb1d1e the idle time warn_after is judged on is observed time, and each sweep counts at most as long as the
 * sweep before it (IdleWatch.observed: {@code min(step, lastStep)}): with sweeps that do not come evenly, most of the
 * time the meter measured idle never reaches the policy. Sweeps every 10 s, every third one 2 min late (the console's
 * tick blocked behind a slow ledger catch-up or store fsync; ConsoleServer ticks with a fixed delay, so the late sweep
 * is just late): each cycle of 2 min 20 s credits 30 s. Bob's GPU reads 0 % at every sweep for 40 minutes; the meter
 * holds him idle since his grant (and records 40 min of idle seconds), yet with warn_after 10 min he is never warned:
 * the policy has counted under 9 min (30/140 of the wall time), and act_after 15 min would come after about 70 min.
 */
@Tag("adversarial")
class StalledSweepsStarveTheIdlePolicyTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void anIdleAllocationIsWarnedWhenSweepsComeUnevenly() {
        IdlePolicy p = new IdlePolicy(1, Duration.ofMinutes(2), Duration.ofMinutes(10), Duration.ofMinutes(15),
                IdlePolicy.Action.RELEASE, "TERM", Duration.ofMinutes(5), List.of(), false, List.of());
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofMinutes(1)).withIdle(p))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0)); // idle, all along
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("bob").build());
            Instant granted = node.clock.instant();
            List<IdleAction> steps = new ArrayList<>();
            Duration[] cycle = {Duration.ofSeconds(10), Duration.ofSeconds(10), Duration.ofMinutes(2)};
            int k = 0;
            while (Duration.between(granted, node.clock.instant()).compareTo(Duration.ofMinutes(40)) < 0) {
                steps.addAll(node.run(cycle[k++ % cycle.length], 1));
            }
            Instant idleSince = node.sampler.idleSince().get(a.id());
            assertThat(idleSince).as("the meter's idle start for bob").isNotNull();
            Duration measuredIdle = Duration.between(idleSince, node.clock.instant());
            assertThat(measuredIdle).as("idle as the meter measured it").isGreaterThan(Duration.ofMinutes(35));
            assertThat(steps).as("idle steps after bob's GPU read 0 %% at every sweep for %s (the meter: idle since"
                    + " %s; warn_after 10 min, act_after 15 min): %s", measuredIdle, idleSince,
                    steps.stream().map(s -> s.at() + " " + s.action() + " " + s.detail()).toList())
                    .anyMatch(s -> s.action() == IdleStep.WARNED);
        }
    }
}
