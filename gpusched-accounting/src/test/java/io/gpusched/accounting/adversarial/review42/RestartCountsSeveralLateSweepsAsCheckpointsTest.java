package io.gpusched.accounting.adversarial.review42;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.IdlePolicy;
import io.gpusched.accounting.IdleStep;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.GpuRequest;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * 744159e6 (review41's late-sweep finding, "fixed"): the running policy counts a late sweep at most 30 s or twice the
 * shortest of the last 8 sweeps' steps; the restarted policy (Stretch.countedSince) counts each checkpoint interval
 * up to 30 s more than the longer of a minute and the shortest of the 8 intervals before it. With 5-min checkpoints
 * and sweeps every 10 s, four sweeps each 9 min late (under the 10-min jump bound) count 4 x 30 s for the running
 * policy and 4 x 330 s for a policy restarted 10 s later: 20 minutes the running policy refused to count come back at
 * once ("a sweep late ... even again and again ... delays the policy rather than hastens it"; a restarted policy warns
 * "never sooner" than one never restarted). warn_after 20 min: the running policy has counted 7 min, and a policy
 * never restarted does not warn for 13 more minutes; the restarted one warns at its first measured sweep.
 */
class RestartCountsSeveralLateSweepsAsCheckpointsTest {
    @TempDir
    Path dir;

    private static final IdlePolicy POLICY = Review42.policy(Duration.ofMinutes(20), Duration.ofMinutes(40),
            Duration.ofMinutes(8));

    private static List<IdleAction> before(AccountingNode node) {
        node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
        List<IdleAction> steps = new ArrayList<>(node.run(Duration.ofSeconds(10), 30)); // 5 min observed
        steps.addAll(node.run(Duration.ofMinutes(9), 4)); // four late sweeps: 4 x 30 s observed
        return steps;
    }

    @Test
    void lateSweepsBeforeARestartDoNotMakeTheRestartedPolicyWarnSooner() {
        try (AccountingNode control = Review42.node(dir.resolve("control"), Duration.ofMinutes(5), POLICY)) {
            List<IdleAction> steps = before(control);
            control.clock.advance(Duration.ofSeconds(10));
            steps.addAll(control.run(Duration.ofSeconds(10), 18));
            assertThat(steps).extracting(IdleAction::action)
                    .as("the control (never restarted) counted about 10 min: %s", Review42.steps(steps))
                    .doesNotContain(IdleStep.WARNED);
        }
        try (AccountingNode node = Review42.node(dir.resolve("restarted"), Duration.ofMinutes(5), POLICY)) {
            List<IdleAction> steps = before(node);
            assertThat(steps).extracting(IdleAction::action).as("the running policy: %s", Review42.steps(steps))
                    .doesNotContain(IdleStep.WARNED);
            node.stopSampler();
            node.clock.advance(Duration.ofSeconds(10));
            node.startSampler();
            List<IdleAction> after = node.run(Duration.ofSeconds(10), 18); // 3 min
            assertThat(after).extracting(IdleAction::action)
                    .as("the running policy counted 5 min + 4 late sweeps x 30 s = 7 min, 3 min more after the"
                            + " restart make 10: warn_after (20 min) is not reached, and the same trace never restarted"
                            + " did not warn; the restarted policy counted each late sweep's 9-min interval as 330 s."
                            + " After the restart:%s", Review42.steps(after))
                    .doesNotContain(IdleStep.WARNED);
        }
    }
}
