package io.gpusched.accounting.adversarial.review48;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.IdlePolicy;
import io.gpusched.accounting.IdleStep;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalDouble;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * docs/ACCOUNTING.md: "A step back counts nothing, nor the step forward right after it"; "a first sweep behind the last
 * one its predecessor judged is a step back, so the step forward past that sweep counts nothing, as for the policy that
 * ran on (review46)"; and "a restarted sampler that sweeps as a running one would takes the same steps at the same
 * sweeps". Review46's fix learns the last sweep its predecessor judged only from the policy's counts, which are written
 * only for allocations in an idle stretch. Here the allocation is busy up to the sweep L; the wall clock steps back
 * 55 s and the GPU goes idle; the sampler is stopped (a planned stop) and started again at once, and the new one sweeps
 * exactly when the one that ran on does (every 10 s behind L, then one sweep 30 s after the one before, past L, then
 * every 10 s). Both meters credit nothing until the clock passes L. The policy that ran on counts nothing for the step
 * past L (the first step forward after a step back); the restarted one had no count to learn L from, took its own first
 * sweep (behind L) for the latest judged, and counts that step (25 s of idle time at once): it flags 20 s sooner.
 */
class ARestartBehindTheClockBeforeAnyStretchCountsTheStepPastItTest {
    @TempDir
    Path dir;

    /** window 2 min, warn_after 10, act_after 30; checkpoints every minute. */
    private static AccountingSettings settings() {
        return AccountingSettings.defaults().withCheckpoint(Duration.ofMinutes(1)).withIdle(new IdlePolicy(1,
                Duration.ofMinutes(2), Duration.ofMinutes(10), Duration.ofMinutes(30), IdlePolicy.Action.RELEASE,
                "TERM", Duration.ofMinutes(8), List.of(), false, List.of()));
    }

    private static GpuMetrics busy(GpuMetrics m) {
        return new GpuMetrics(m.index(), OptionalDouble.of(95), m.memoryUsed(), m.temperatureCelsius(),
                m.powerWatts(), m.sampledAt(), m.energyMillijoules());
    }

    /** @return when the allocation was first flagged (null: never, in 10 minutes of idle sweeps past L) */
    private static Instant firstFlagged(Path dir, boolean restart, List<IdleAction> all) {
        try (AccountingNode node = new AccountingNode(dir, settings())) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0)); // idle unless swept busy
            node.sweep();
            node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            for (int i = 0; i < 18; i++) { // busy for 3 minutes, to L
                node.clock.advance(Duration.ofSeconds(10));
                all.addAll(node.sweepWith(0, ARestartBehindTheClockBeforeAnyStretchCountsTheStepPastItTest::busy));
            }
            node.clock.advance(Duration.ofSeconds(-55)); // the wall clock steps back 55 s: L - 55 s; idle from now
            all.addAll(node.sweep());
            if (restart) {
                node.restartSampler(); // a planned stop and start, no time lost
            }
            all.addAll(node.run(Duration.ofSeconds(10), 5)); // L - 45 s to L - 5 s: behind L
            all.addAll(node.run(Duration.ofSeconds(30), 1)); // L + 25 s: past L
            for (int i = 0; i < 6 * 10; i++) {
                all.addAll(node.run(Duration.ofSeconds(10), 1));
                Instant f = all.stream().filter(a -> a.action() == IdleStep.FLAGGED).map(IdleAction::at).findFirst()
                        .orElse(null);
                if (f != null) {
                    return f;
                }
            }
            return null;
        }
    }

    @Test
    void theRestartedSamplerFlagsAtTheSameSweepAsTheOneThatRanOn() {
        List<IdleAction> ranOnSteps = new ArrayList<>();
        Instant ranOn = firstFlagged(dir.resolve("ran-on"), false, ranOnSteps);
        assertThat(ranOn).as("the sampler that ran on flags: %s", ranOnSteps).isNotNull();
        List<IdleAction> restartedSteps = new ArrayList<>();
        Instant restarted = firstFlagged(dir.resolve("restarted"), true, restartedSteps);
        assertThat(restarted).as("busy to L, the clock stepped back 55 s and the GPU idle from then, the sampler"
                + " stopped and started there (no idle stretch in the store, so no count), sweeping as the one that"
                + " ran on: expected flagged at the same sweep as the sampler that ran on (%s), which counts nothing"
                + " for the step past L; the restarted one flagged at %s; its steps: %s", ranOn, restarted,
                restartedSteps)
                .isEqualTo(ranOn);
    }
}
