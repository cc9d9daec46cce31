package io.gpusched.accounting.adversarial.review30;

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
 * fix28's grace (IdleWatch.observed): "each sweep after the warning counts at most as long as the sweep before it
 * took ...; a step back counts nothing" (docs/ACCOUNTING.md, idle policy). But a step back does not update
 * {@code lastStep}: the sweep after a step back is credited up to the last step <em>forward</em>, however long ago.
 * A clock that flaps (two time sources 9 min 40 s apart, a VM's clock stepped by its host and by NTP in turn) steps
 * ahead, back, ahead again: the second step ahead, right after a step back, is credited in full (9 min 50 s), and
 * alice's allocation is released 40 s of real time after her warning ("released in 5 min unless they get busy").
 * review28's GraceSpentByOneSweepTest tried a single step ahead only.
 */
@Tag("adversarial")
class GraceSpentByAClockThatFlapsTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aStepAheadRightAfterAStepBackDoesNotSpendTheGrace() {
        IdlePolicy p = new IdlePolicy(1, Duration.ofMinutes(1), Duration.ofMinutes(10), Duration.ofMinutes(15),
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
            assertThat(steps).as("idle steps before the clock flaps").anyMatch(s -> s.action() == IdleStep.WARNED)
                    .noneMatch(s -> s.action() == IdleStep.RELEASED);
            Instant warned = node.clock.instant(); // the true time of the warning's sweep
            Duration ahead = Duration.ofMinutes(9).plusSeconds(40);
            List<IdleAction> after = new ArrayList<>();
            // one sweep every 10 s of real time; the wall clock reads true, ahead, true, ahead
            node.clock.set(warned.plusSeconds(10));
            after.addAll(node.sweep());
            node.clock.set(warned.plusSeconds(20).plus(ahead)); // 9 min 50 s forward: under the 10-min jump bound
            after.addAll(node.sweep());
            node.clock.set(warned.plusSeconds(30)); // back to the true time
            after.addAll(node.sweep());
            node.clock.set(warned.plusSeconds(40).plus(ahead)); // 9 min 50 s forward again
            after.addAll(node.sweep());
            assertThat(after).as("idle steps at the 4 sweeps after alice's warning (40 s of real time; the wall clock"
                    + " flapped 9 min 40 s ahead, back, and ahead again): %s",
                    after.stream().map(s -> s.at() + " "
                            + s.action() + " " + s.detail()).toList())
                    .noneMatch(s -> s.action() == IdleStep.RELEASED);
            assertThat(node.scheduler.allocations()).as("live allocations").extracting(Allocation::id)
                    .contains(a.id());
        }
    }
}
