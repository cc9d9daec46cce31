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
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalDouble;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Since review34 "a sweep that measured nothing for the allocation ... keeps its state: not BUSY_AGAIN" and "Busy
 * again at any sweep: left alone, audited BUSY_AGAIN" (docs/ACCOUNTING.md, idle policy). A sweep whose utilization read
 * failed for the allocation's GPU (NVML returned no value once: {@code utilizationPercent} empty) measured nothing
 * about it either, yet UsageMeter.credit treats "no utilization figure" as not idle ({@code allIdle = false},
 * {@code tr.idleSince = null}) and IdleWatch.evaluate reads "no idle start" as busy: alice, idle and warned, is
 * audited {@code BUSY_AGAIN} ("busy again: left alone (it was warned at ...)") and told "GPUs of ... are busy again",
 * and her warning is thrown away (states.remove). Nothing was measured busy: the audit and the notice are untrue.
 */
@Tag("adversarial")
class UnreadSweepCallsAnIdleGpuBusyAgainTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aSweepThatCouldNotReadTheGpuIsNotBusyAgain() {
        IdlePolicy p = new IdlePolicy(1, Duration.ofMinutes(1), Duration.ofMinutes(10), Duration.ofMinutes(15),
                IdlePolicy.Action.RELEASE, "TERM", Duration.ofMinutes(5), List.of(), false, List.of());
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofMinutes(1)).withIdle(p))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0)); // idle all along
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            List<IdleAction> steps = new ArrayList<>();
            for (int i = 0; i < 200 && steps.stream().noneMatch(s -> s.action() == IdleStep.WARNED); i++) {
                steps.addAll(node.run(Duration.ofSeconds(10), 1));
            }
            assertThat(steps).as("alice idle").anyMatch(s -> s.action() == IdleStep.WARNED);
            int noticesBefore = node.notices.size();
            // one sweep at which the driver returned no utilization for GPU 0 (a transient read failure)
            node.clock.advance(Duration.ofSeconds(10));
            List<IdleAction> unread = node.sweepWith(0, m -> new GpuMetrics(m.index(), OptionalDouble.empty(),
                    m.memoryUsed(), m.temperatureCelsius(), m.powerWatts(), m.sampledAt(), m.energyMillijoules()));
            List<IdleAction> after = new ArrayList<>(unread);
            after.addAll(node.run(Duration.ofSeconds(10), 3)); // idle again, read again
            List<?> notices = node.notices.subList(noticesBefore, node.notices.size());
            assertThat(after).as("the idle policy's steps at and after a sweep that read no utilization for alice's"
                    + " idle GPU (nothing was measured busy); notices to alice then: %s", notices)
                    .noneMatch(s -> s.action() == IdleStep.BUSY_AGAIN);
            assertThat(node.sampler.idleWatch().warnedAt(a.id())).as("alice's warning after one unread sweep")
                    .isPresent();
        }
    }
}
