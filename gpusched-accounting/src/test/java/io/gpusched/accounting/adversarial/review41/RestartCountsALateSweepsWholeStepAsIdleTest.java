package io.gpusched.accounting.adversarial.review41;

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
 * The policy counts one sweep's step as at most 30 s (or twice the recent cadence): "a sweep late or a clock stepped
 * ahead ... delays the policy rather than hastens it" (review33/34/36). A sweep 9 minutes late (under the meter's
 * 10-min jump bound) is credited as 30 s by the running policy, but the meter's interval covers the whole step, and a
 * restart 30 s later seeds idleObserved with the stretch's wall time less gaps (Stretch.sampledSince): the 9 minutes
 * the running policy refused to count come back at once, and the restarted policy warns at its first sweep, about
 * 4 minutes of observed idleness in.
 */
class RestartCountsALateSweepsWholeStepAsIdleTest {
    @TempDir
    Path dir;

    @Test
    void aRestartDoesNotTurnALateSweepIntoObservedIdleTime() {
        try (AccountingNode node = Review41.node(dir, Review41.settings(
                Review41.policy(IdlePolicy.Action.RELEASE, false), Duration.ofMinutes(1)))) {
            node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            List<IdleAction> before = new ArrayList<>(node.run(Duration.ofSeconds(10), 12)); // 2 min observed
            before.addAll(node.run(Duration.ofMinutes(9), 1)); // one late sweep (or a clock step): counts 30 s
            before.addAll(node.run(Duration.ofSeconds(10), 6)); // 1 min more: ~3.5 min observed, wall ~12 min
            assertThat(before).extracting(IdleAction::action).as("the running policy: %s", Review41.steps(before))
                    .doesNotContain(IdleStep.WARNED);
            node.stopSampler();
            node.clock.advance(Duration.ofSeconds(30));
            node.startSampler();
            List<IdleAction> after = node.run(Duration.ofSeconds(10), 6 * 3); // 3 min after the restart
            assertThat(after).extracting(IdleAction::action)
                    .as("about 6.5 min of observed idleness at most (the late sweep counted 30 s, as the running"
                            + " policy counted it): warn_after (10 min) is not reached. After the restart: %s",
                            Review41.steps(after))
                    .doesNotContain(IdleStep.WARNED);
        }
    }
}
