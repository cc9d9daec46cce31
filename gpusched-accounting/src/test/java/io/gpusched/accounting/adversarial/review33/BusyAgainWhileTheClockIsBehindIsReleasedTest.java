package io.gpusched.accounting.adversarial.review33;

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
 * docs/ACCOUNTING.md, idle policy: "Busy again at any sweep: left alone". But after the wall clock steps back, the
 * meter credits nothing (so measures no utilization) until the clock passes the allocation's last credited sweep
 * (UsageMeter.observe: {@code tr.covered < t} is false, {@code credit} is not called, {@code idleSince} and the idle
 * map keep the old "idle since"), while IdleWatch keeps evaluating the stale idle start against the stepped clock and
 * credits the grace again for the wall-clock span it already credited before the step (its {@code sinceWarning}
 * counts the re-traversed span (warnedAt, covered] a second time). Alice is warned, idle 3 min more, then the clock
 * steps back 10 min and her job gets busy (80 %) at once: her allocation is released while it has been busy for
 * minutes of real time, and no sweep ever measured that busy time.
 */
@Tag("adversarial")
class BusyAgainWhileTheClockIsBehindIsReleasedTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aJobBusyAgainAfterTheClockSteppedBackIsLeftAlone() {
        IdlePolicy p = new IdlePolicy(1, Duration.ofMinutes(1), Duration.ofMinutes(10), Duration.ofMinutes(10),
                IdlePolicy.Action.RELEASE, "TERM", Duration.ofMinutes(5), List.of(), false, List.of());
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofMinutes(1)).withIdle(p))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0)); // idle
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            List<IdleAction> steps = new ArrayList<>();
            for (int i = 0; i < 200 && steps.stream().noneMatch(s -> s.action() == IdleStep.WARNED); i++) {
                steps.addAll(node.run(Duration.ofSeconds(10), 1));
            }
            assertThat(steps).as("idle steps before the step back").anyMatch(s -> s.action() == IdleStep.WARNED);
            steps.addAll(node.run(Duration.ofSeconds(10), 18)); // 3 min after the warning: grace not spent
            assertThat(steps).as("idle steps before the step back").noneMatch(s -> s.action() == IdleStep.RELEASED);

            // NTP steps the clock back 10 min; alice's job starts computing at the same moment
            node.clock.set(node.clock.instant().minus(Duration.ofMinutes(10)));
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 80));
            List<IdleAction> after = new ArrayList<>();
            int realSeconds = 0;
            for (int i = 0; i < 66 && node.scheduler.allocations().stream().anyMatch(x -> x.id().equals(a.id())); i++) {
                after.addAll(node.sweep());
                node.clock.advance(Duration.ofSeconds(10));
                realSeconds += 10;
            }
            int busyFor = realSeconds;
            assertThat(after).as("idle steps while alice's job was busy at 80 %% (for %d s of real time, after the"
                    + " clock stepped back 10 min): %s", busyFor,
                    after.stream().map(s -> s.at() + " " + s.action()
                            + " " + s.detail()).toList())
                    .noneMatch(s -> s.action() == IdleStep.RELEASED);
            assertThat(node.scheduler.allocations()).as("live allocations").extracting(Allocation::id)
                    .contains(a.id());
        }
    }
}
