package io.gpusched.accounting.adversarial.review28;

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
 * The idle policy's grace ("acted on once idle for act_after and at least grace after its warning", IdleWatch) is
 * wall-clock time between two sweeps' timestamps, and so is the idle time a sweep credits (UsageMeter.credit: the
 * whole span since the previous sweep, judged by this sweep's one sample). Checkpoints were made immune to clock steps
 * (keyed on the sweeps' steps and System.nanoTime); the idle policy was not. A sweep 9 min 50 s after the previous
 * one is not a "jump" (UsageMeter.MAX_SWEEP_MILLIS is 10 min), though sweeps come every --interval (at most 5 min):
 * an NTP step forward of that size (or a sampler stalled that long, during which nothing sampled the GPU) credits
 * 9 min 50 s of idle time from one sample and spends the whole 5-minute grace at once. Alice is warned ("it will be
 * released in 5 min unless they get busy") and released by the very next sweep, 10 s of real time later: she had no
 * chance to act on the warning. "Nothing is reclaimed on a guess."
 */
@Tag("adversarial")
class GraceSpentByOneSweepTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void theSweepRightAfterAWarningDoesNotReleaseTheAllocation() {
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
            assertThat(steps).as("idle steps before the clock step").anyMatch(s -> s.action() == IdleStep.WARNED)
                    .noneMatch(s -> s.action() == IdleStep.RELEASED);
            // the next sweep: the wall clock was stepped 9 min 40 s forward since the warning's sweep
            List<IdleAction> next = node.run(Duration.ofSeconds(10).plusMinutes(9).plusSeconds(40), 1);
            assertThat(next).as("idle steps at the sweep right after alice's warning (10 s of real time later; the"
                    + " wall clock stepped 9 min 40 s ahead in between, under the 10-min jump bound)")
                    .noneMatch(s -> s.action() == IdleStep.RELEASED);
            assertThat(node.scheduler.allocations()).as("live allocations").extracting(Allocation::id)
                    .contains(a.id());
        }
    }
}
