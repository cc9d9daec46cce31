package io.gpusched.accounting.adversarial.review38;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingRecord.Interval;
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
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalDouble;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * docs/ACCOUNTING.md: a sweep "in which no GPU of it read busy while one could not be read" keeps the policy's state;
 * the policy starts over (STARTED_OVER) only "when the meter starts an allocation's idle clock over after a gap of more
 * than 10 minutes that no sweep measured (a suspended host, a jump that stayed)". Sweeps every 10 s that could not read
 * alice's GPU's utilization for 11 minutes (a driver answering no utilization for a while; memory, power and energy
 * read and recorded, no gap in the store) each keep her state, yet the first idle sweep after them is audited
 * STARTED_OVER, "11 min no sweep measured", and her warning is dropped: UsageMeter.credit resets its idle start at an
 * unread sweep, and IdleWatch takes a new idle start more than 10 minutes after its last idle sweep for a suspended
 * host, whatever the sweeps in between measured.
 */
@Tag("adversarial")
class LongUnreadStretchStartsThePolicyOverTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void unreadSweepsKeepTheStateHoweverLongTheyLast() {
        IdlePolicy p = new IdlePolicy(1, Duration.ofMinutes(1), Duration.ofMinutes(5), Duration.ofMinutes(60),
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
            assertThat(steps).as("alice idle and warned").anyMatch(s -> s.action() == IdleStep.WARNED);
            List<IdleAction> after = new ArrayList<>();
            for (int i = 0; i < 66; i++) { // 11 minutes of sweeps that read no utilization for GPU 0
                node.clock.advance(Duration.ofSeconds(10));
                after.addAll(node.sweepWith(0, m -> new GpuMetrics(m.index(), OptionalDouble.empty(),
                        m.memoryUsed(), m.temperatureCelsius(), m.powerWatts(), m.sampledAt(),
                        m.energyMillijoules())));
            }
            after.addAll(node.run(Duration.ofSeconds(10), 3)); // read again: idle
            List<String> gaps = new ArrayList<>();
            node.store.readDay(LocalDate.of(2026, 3, 2), r -> {
                if (r instanceof Interval iv && iv.gap() && iv.allocationId().equals(a.id())) {
                    gaps.add(iv.from() + " to " + iv.to());
                }
            }, new ArrayList<>());
            assertThat(gaps).as("gaps (time no sweep measured) the store holds for alice").isEmpty();
            assertThat(after).as("the policy's steps after 11 minutes of sweeps (every 10 s) that could not read"
                    + " alice's utilization, none of them busy, no gap: %s",
                    after.stream().map(s -> s.action() + " "
                            + s.detail()).toList())
                    .noneMatch(s -> s.action() == IdleStep.STARTED_OVER);
            assertThat(node.sampler.idleWatch().warnedAt(a.id())).as("alice's warning after unread sweeps")
                    .isPresent();
        }
    }
}
