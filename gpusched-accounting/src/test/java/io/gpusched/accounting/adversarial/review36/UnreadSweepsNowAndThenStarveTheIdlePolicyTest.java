package io.gpusched.accounting.adversarial.review36;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.IdlePolicy;
import io.gpusched.accounting.IdleStep;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalDouble;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The impact of {@link UnreadSweepCallsAnIdleGpuBusyAgainTest}'s cause: an allocation "idle at every regular sweep" is
 * starved by the policy when its GPU's utilization read fails now and then. Carol's GPU reads 0 % at every sweep for
 * an hour, except that once every 5 minutes the driver returns no utilization for it (a transient NVML error under
 * load): each such sweep is taken as busy (UsageMeter.credit clears the idle start; IdleWatch audits BUSY_AGAIN and
 * starts over), so with warn_after 10 min she is never warned; the policy instead tells her twelve times that her GPUs
 * "are busy again". A sweep that measured nothing is documented to keep the policy's state (review34).
 */
@Tag("adversarial")
class UnreadSweepsNowAndThenStarveTheIdlePolicyTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void anIdleAllocationIsWarnedThoughItsGpuIsUnreadNowAndThen() {
        IdlePolicy p = new IdlePolicy(1, Duration.ofMinutes(2), Duration.ofMinutes(10), Duration.ofMinutes(15),
                IdlePolicy.Action.RELEASE, "TERM", Duration.ofMinutes(5), List.of(), false, List.of());
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofMinutes(1)).withIdle(p))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0)); // idle all along
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("carol").build());
            Instant granted = node.clock.instant();
            List<IdleAction> steps = new ArrayList<>();
            for (int i = 1; Duration.between(granted, node.clock.instant())
                    .compareTo(Duration.ofMinutes(60)) < 0; i++) {
                node.clock.advance(Duration.ofSeconds(10));
                if (i % 30 == 0) { // every 5 minutes: no utilization read for GPU 0
                    steps.addAll(node.sweepWith(0, m -> new GpuMetrics(m.index(), OptionalDouble.empty(),
                            m.memoryUsed(), m.temperatureCelsius(), m.powerWatts(), m.sampledAt(),
                            m.energyMillijoules())));
                } else {
                    steps.addAll(node.sweep());
                }
            }
            // (review36 asserted here that carol still held GPU 0 after the hour: with the policy reaching her, she is
            // released after act_after, as the policy says, so what is checked is that she was warned first)
            int warned = steps.stream().map(IdleAction::action).toList().indexOf(IdleStep.WARNED);
            int released = steps.stream().map(IdleAction::action).toList().indexOf(IdleStep.RELEASED);
            assertThat(released < 0 || warned >= 0 && warned < released).as("warned before released: %s",
                    steps.stream().map(s -> s.at() + " " + s.action()).toList()).isTrue();
            assertThat(node.scheduler.allocations().stream().anyMatch(x -> x.id().equals(a.id())))
                    .as("released only after act_after").isEqualTo(released < 0);
            assertThat(steps).as("idle steps for carol, whose GPU read 0 %% at every sweep for an hour but had no"
                    + " utilization read once every 5 min (warn_after 10 min): %s",
                    steps.stream().map(s -> s.at() + " " + s.action()).toList())
                    .anyMatch(s -> s.action() == IdleStep.WARNED);
        }
    }
}
