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
 * "Busy again at any sweep: left alone, audited BUSY_AGAIN" (docs/ACCOUNTING.md, idle policy). Review30 showed a step
 * back audited an idle GPU busy again; f1bb1d1e's high-water mark (IdleWatch.lastEvaluated) covers a step back from a
 * sweep the idle policy judged. Not from one it never saw: a sweep the meter skipped as a jump (over 10 min ahead,
 * AccountingSampler.sweep returns before {@code idle.evaluate}) moves the meter's last tick ahead (UsageMeter.skip)
 * but not IdleWatch's mark. When the clock comes back (a VM resumed with a wrong clock, then corrected by NTP), the
 * meter's next sweep has no previous one ({@code prev == null}: the last tick is ahead), writes a 10-s "gap" and drops
 * the idle start (UsageMeter.gap: {@code tr.idleSince = null; idle.remove}); IdleWatch, not behind its own mark, reads
 * "not idle" and audits alice BUSY_AGAIN, tells her "GPUs ... are busy again", and drops her warning. Her GPU read 0 % at
 * every sweep.
 */
@Tag("adversarial")
class JumpAheadAndBackCallsAnIdleGpuBusyAgainTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void anIdleGpuIsNotBusyAgainAfterTheClockJumpedAheadAndBack() {
        IdlePolicy p = new IdlePolicy(1, Duration.ofMinutes(1), Duration.ofMinutes(10), Duration.ofMinutes(15),
                IdlePolicy.Action.RELEASE, "TERM", Duration.ofMinutes(5), List.of(), false, List.of());
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofMinutes(1)).withIdle(p))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0)); // idle, all along
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            List<IdleAction> steps = new ArrayList<>();
            for (int i = 0; i < 200 && steps.stream().noneMatch(s -> s.action() == IdleStep.WARNED); i++) {
                steps.addAll(node.run(Duration.ofSeconds(10), 1));
            }
            assertThat(steps).as("idle steps before the clock jump").anyMatch(s -> s.action() == IdleStep.WARNED);
            Instant before = node.clock.instant();
            node.clock.set(before.plus(Duration.ofHours(1))); // the clock jumps an hour ahead: one sweep, skipped
            List<IdleAction> after = new ArrayList<>(node.sweep());
            node.clock.set(before.plusSeconds(10)); // and NTP steps it back to the right time
            after.addAll(node.sweep());
            after.addAll(node.run(Duration.ofSeconds(10), 5));
            assertThat(after).as("idle steps after the clock jumped an hour ahead and back; alice's GPU read 0 %% at"
                    + " every sweep: %s",
                    after.stream().map(s -> s.at() + " " + s.action() + " " + s.detail())
                            .toList())
                    .noneMatch(s -> s.action() == IdleStep.BUSY_AGAIN);
            assertThat(node.notices).as("notices to alice").noneMatch(n -> n.step() == IdleStep.BUSY_AGAIN);
            assertThat(node.sampler.idleWatch().warnedAt(a.id())).as("alice's warning, kept").isPresent();
        }
    }
}
