package io.gpusched.accounting.adversarial.review45;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.IdlePolicy;
import io.gpusched.accounting.IdleStatus;
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
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * docs/ACCOUNTING.md: a sweep in which no GPU of an allocation read busy while one could not be read keeps the
 * meter's idle start "however long such sweeps last (review38)", and "a restarted sampler that sweeps as a running one
 * would takes the same steps at the same sweeps"; status agrees with the policy. A restarted sampler's first sweep
 * clears the idle start (UsageMeter.gap) and sets it again only when it reads the allocation idle (review43); when it
 * cannot read utilization (a driver that answers none for a minute, as the service starts), the idle start stays
 * unset, and the checkpoints of those sweeps say "not idle" (no idle start), though the restarted policy rightly keeps
 * the stretch (unmeasured). Once the GPU reads idle again, the meter starts a new idle start, and the store's stretch
 * begins there: IdleStatus does not walk back across the unreadable intervals (no gap record ends there). Sampler A:
 * idle 4 min, stopped; B started 10 s later reads no utilization for 70 s, then idle. Status says idle since B's
 * first idle reading, while B's policy (and the sampler that ran on) count from A's start; a planned restart of B
 * then continues from the store's stretch, not B's count (its start differs), and warns minutes after the sampler
 * that ran on.
 */
class AnUnreadableFirstSweepAfterARestartLosesTheStretchTest {
    @TempDir
    Path dir;

    private static AccountingSettings settings() {
        return AccountingSettings.defaults().withCheckpoint(Duration.ofMinutes(1)).withIdle(new IdlePolicy(1,
                Duration.ofMinutes(5), Duration.ofMinutes(10), Duration.ofMinutes(30), IdlePolicy.Action.RELEASE,
                "TERM", Duration.ofMinutes(8), List.of(), false, List.of()));
    }

    private static GpuMetrics unreadable(GpuMetrics m) {
        return new GpuMetrics(m.index(), OptionalDouble.empty(), m.memoryUsed(), m.temperatureCelsius(),
                m.powerWatts(), m.sampledAt(), m.energyMillijoules());
    }

    private static Instant first(List<IdleAction> steps, IdleStep step) {
        return steps.stream().filter(a -> a.action() == step).map(IdleAction::at).findFirst().orElse(null);
    }

    /** @return the steps; status[0]: status 2 min after the unreadable spell (before any planned restart of B) */
    private static List<IdleAction> play(Path dir, boolean restarts, IdleStatus[] status) {
        try (AccountingNode node = new AccountingNode(dir, settings())) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0));
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            List<IdleAction> steps = new ArrayList<>(node.run(Duration.ofSeconds(10), 6 * 4)); // A: idle 4 min
            assertThat(steps).isEmpty();
            if (restarts) {
                node.stopSampler();
            }
            for (int i = 0; i < 7; i++) { // 10 s later (B's first sweep when restarted) and 60 s more: unreadable
                node.clock.advance(Duration.ofSeconds(10));
                if (restarts && i == 0) {
                    node.startSampler(); // B
                }
                steps.addAll(node.sweepWith(0, AnUnreadableFirstSweepAfterARestartLosesTheStretchTest::unreadable));
            }
            steps.addAll(node.run(Duration.ofSeconds(10), 6 * 2)); // idle again, 2 min
            status[0] = IdleStatus.read(node.store, node.clock.instant()).get(a.id());
            if (restarts) {
                node.restartSampler(); // a planned stop and start, at once
            }
            for (int i = 0; i < 6 * 30 && first(steps, IdleStep.WARNED) == null; i++) {
                steps.addAll(node.run(Duration.ofSeconds(10), 1));
            }
            return steps;
        }
    }

    @Test
    void statusSaysIdleSinceTheStretchTheRestartedPolicyCounts() {
        IdleStatus[] ranOn = new IdleStatus[1];
        play(dir.resolve("ran-on"), false, ranOn);
        assertThat(ranOn[0]).isNotNull();
        assertThat(ranOn[0].idleSince()).isEqualTo(AccountingNode.T0);
        IdleStatus[] restarted = new IdleStatus[1];
        List<IdleAction> steps = play(dir.resolve("restarted"), true, restarted);
        assertThat(restarted[0]).as("status of the restarted sampler's allocation").isNotNull();
        assertThat(restarted[0].idleSince()).as("restarted 10 s after 4 idle minutes; the restarted sampler's first"
                + " 7 sweeps read no utilization (neither idle nor busy: the idle start is kept), then idle: expected"
                + " status to say idle since %s as for the sampler that ran on (%s), the stretch the restarted policy"
                + " counts (its steps:%s); it said %s", AccountingNode.T0, ranOn[0], steps, restarted[0])
                .isEqualTo(ranOn[0].idleSince());
    }

    @Test
    void aPlannedRestartAfterThatWarnsWhenTheSamplerThatRanOnDoes() {
        IdleStatus[] ignored = new IdleStatus[1];
        Instant ranOn = first(play(dir.resolve("ran-on"), false, ignored), IdleStep.WARNED);
        assertThat(ranOn).isNotNull();
        List<IdleAction> restarted = play(dir.resolve("restarted"), true, ignored);
        // each restart's first sweep counts nothing (10 s each); a minute of slack besides
        assertThat(first(restarted, IdleStep.WARNED)).as("restarted 10 s after 4 idle minutes, its first 7 sweeps"
                + " unreadable (the idle start kept, as a running sampler keeps it), then idle, then restarted"
                + " again (planned, at once): expected warned within a minute of the sampler that ran on (%s); its"
                + " steps:%s", ranOn, restarted).isNotNull().isBeforeOrEqualTo(ranOn.plus(Duration.ofMinutes(1)));
    }
}
