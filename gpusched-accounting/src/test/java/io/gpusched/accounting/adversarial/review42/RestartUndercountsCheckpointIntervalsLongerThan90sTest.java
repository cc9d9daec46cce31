package io.gpusched.accounting.adversarial.review42;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.IdlePolicy;
import io.gpusched.accounting.IdleStep;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.GpuRequest;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * 744159e6: Stretch.countedSince caps each checkpoint interval at 30 s more than the longer of a minute and the
 * shortest of the 8 intervals before it. The cap is taken from the checkpoint intervals' lengths, not from the sweeps'
 * cadence the running policy caps by: with a checkpoint longer than 90 s (gpu.accounting.checkpoint is 1 s to 1 h),
 * the first interval of a stretch, and every interval after a short one (the last checkpoint a planned stop writes),
 * counts only 90 s though sweeps every 10 s observed all of it. ACCOUNTING.md: the bound is "never tighter than the
 * time sampled", and a sampler restarted every few minutes warns at the same sampled time as one never restarted.
 *
 * <p>Checkpoints every 5 min, sweeps every 10 s, the sampler restarted every 6 min (down 30 s): each life writes a
 * 300-s interval and a 50-s one, and the restarted policy counts 90 + 50 of each 350 s sampled. warn_after is 10 min:
 * a policy never restarted warns after 10 min of idleness; the restarted one warns after about 17 min of sampled
 * idleness (18 min of wall time).
 */
class RestartUndercountsCheckpointIntervalsLongerThan90sTest {
    @TempDir
    Path dir;

    private static final IdlePolicy POLICY = Review42.policy(Duration.ofMinutes(10), Duration.ofMinutes(20),
            Duration.ofMinutes(8));

    @Test
    void aSamplerRestartedEverySixMinutesWithFiveMinuteCheckpointsWarnsAtTheSampledWarnAfter() {
        Instant controlWarned;
        try (AccountingNode control = Review42.node(dir.resolve("control"), Duration.ofMinutes(5), POLICY)) {
            control.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            List<IdleAction> steps = control.run(Duration.ofSeconds(10), 6 * 12);
            controlWarned = Review42.first(steps, IdleStep.WARNED).orElseThrow(() -> new AssertionError(
                    "the control (never restarted) was not warned in 12 min:" + Review42.steps(steps)));
            assertThat(Duration.between(AccountingNode.T0, controlWarned)).as("the control warns at warn_after")
                    .isLessThanOrEqualTo(Duration.ofMinutes(10).plusSeconds(20));
        }
        try (AccountingNode node = Review42.node(dir.resolve("restarted"), Duration.ofMinutes(5), POLICY)) {
            node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            List<IdleAction> steps = new ArrayList<>();
            int restarts = 0;
            for (int life = 0; life < 5 && Review42.first(steps, IdleStep.WARNED).isEmpty(); life++) {
                steps.addAll(node.run(Duration.ofSeconds(10), 36)); // 6 min of sweeps every 10 s
                if (Review42.first(steps, IdleStep.WARNED).isEmpty()) {
                    node.stopSampler(); // a planned stop: its last checkpoint is written
                    node.clock.advance(Duration.ofSeconds(30));
                    node.startSampler();
                    restarts++;
                }
            }
            Instant warned = Review42.first(steps, IdleStep.WARNED).orElse(node.clock.instant());
            // each restart: 30 s down and one sweep (10 s) that measures nothing; 10 min of sampled idleness needed
            Duration bound = Duration.ofMinutes(10).plusSeconds(20).plusSeconds(40L * 2);
            assertThat(Duration.between(AccountingNode.T0, warned))
                    .as("warn_after is 10 min of sampled idleness; the policy never restarted warned %s after the"
                            + " grant; restarted every 6 min (30 s down, %d restarts before the warning), it should"
                            + " warn within %s of the grant (10 min sampled plus 2 restarts' downtime and first"
                            + " sweeps), but the 5-min checkpoint intervals are counted 90 s each after a restart."
                            + " Steps:%s", Duration.between(AccountingNode.T0, controlWarned), restarts, bound,
                            Review42.steps(steps))
                    .isLessThanOrEqualTo(bound);
        }
    }
}
