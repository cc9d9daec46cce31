package io.gpusched.accounting.adversarial.review41;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.IdlePolicy;
import io.gpusched.accounting.IdleStatus;
import io.gpusched.accounting.IdleStep;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * "Time the sampler was down counts for nothing" and "status agrees with the policy": a sampler that runs 1 minute,
 * is down 9 minutes (under the 10-min bound, so the stretch continues), three times over, has sampled about 4 min 20 s
 * of idleness, and the policy has not even flagged it (window 5 min). Status continues the stretch back to its start
 * and shows its wall time, downtime included ("idle 31 min").
 */
class StatusCountsTheRestartsDowntimeAsIdleTest {
    @TempDir
    Path dir;

    @Test
    void statusShowsTheSampledIdleTimeNotTheRestartsDowntime() {
        try (AccountingNode node = Review41.node(dir, Review41.settings(
                Review41.policy(IdlePolicy.Action.RELEASE, false), Duration.ofMinutes(1)))) {
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            List<IdleAction> steps = new ArrayList<>(node.run(Duration.ofSeconds(10), 6));
            for (int i = 0; i < 3; i++) {
                node.stopSampler();
                node.clock.advance(Duration.ofMinutes(9));
                node.startSampler();
                steps.addAll(node.run(Duration.ofSeconds(10), 6));
            }
            // 20 s more: the restarted sampler's second checkpoint (its first, at the gap's sweep, has no idle start)
            steps.addAll(node.run(Duration.ofSeconds(10), 2));
            assertThat(steps).extracting(IdleAction::action).as("%s", Review41.steps(steps))
                    .doesNotContain(IdleStep.FLAGGED, IdleStep.STARTED_OVER);
            IdleStatus st = IdleStatus.read(node.store, node.clock.instant()).get(a.id());
            assertThat(st).as("status lists it idle").isNotNull();
            assertThat(st.idleFor()).as("status %s: about 4 min 20 s sampled (27 min down, counting for nothing; the"
                    + " policy has not flagged it at window 5 min)", st.describe())
                    .isLessThanOrEqualTo(Duration.ofMinutes(5));
        }
    }
}
