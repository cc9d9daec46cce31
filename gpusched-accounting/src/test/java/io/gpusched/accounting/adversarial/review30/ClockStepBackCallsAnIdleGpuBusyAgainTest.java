package io.gpusched.accounting.adversarial.review30;

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
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * "Busy again at any sweep: left alone, audited BUSY_AGAIN" (docs/ACCOUNTING.md, idle policy); "every action audited".
 * IdleWatch.evaluate takes an idle start after the sweep's time ({@code since.isAfter(now)}) as "not idle": after the
 * wall clock is stepped back past the moment alice's GPU went idle (NTP correcting a clock that ran 15 minutes fast),
 * her GPU, idle at every sweep, is audited BUSY_AGAIN and she is told "GPUs ... are busy again", her warning and
 * idle clock are dropped, and she is warned a second time later. The meter did not say her GPU was busy: its idle start
 * is unchanged (nothing is credited at a sweep before the last one). Nothing was measured busy; the audit says it was.
 */
@Tag("adversarial")
class ClockStepBackCallsAnIdleGpuBusyAgainTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void anIdleGpuIsNotAuditedBusyAgainWhenTheClockStepsBack() {
        IdlePolicy p = new IdlePolicy(1, Duration.ofMinutes(1), Duration.ofMinutes(10), Duration.ofMinutes(15),
                IdlePolicy.Action.RELEASE, "TERM", Duration.ofMinutes(5), List.of(), false, List.of());
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofMinutes(1)).withIdle(p))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0)); // idle, all along
            node.sweep();
            node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            List<IdleAction> steps = new ArrayList<>();
            for (int i = 0; i < 200 && steps.stream().noneMatch(s -> s.action() == IdleStep.WARNED); i++) {
                steps.addAll(node.run(Duration.ofSeconds(10), 1));
            }
            assertThat(steps).as("idle steps before the clock step").anyMatch(s -> s.action() == IdleStep.WARNED);
            node.clock.set(node.clock.instant().minus(Duration.ofMinutes(15))); // NTP steps the clock back
            List<IdleAction> after = new ArrayList<>(node.sweep());
            after.addAll(node.run(Duration.ofSeconds(10), 5));
            assertThat(after).as("idle steps after the clock stepped back 15 min; alice's GPU read 0 %% at every"
                    + " sweep: %s", after.stream().map(s -> s.at() + " " + s.action() + " " + s.detail()).toList())
                    .noneMatch(s -> s.action() == IdleStep.BUSY_AGAIN);
            assertThat(node.notices).as("notices to alice").noneMatch(n -> n.step() == IdleStep.BUSY_AGAIN);
        }
    }
}
