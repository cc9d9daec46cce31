package io.gpusched.accounting.adversarial.review42;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.IdlePolicy;
import io.gpusched.accounting.IdleStep;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A restarted sampler's first sweep writes the restart's gap and clears the meter's idle start; its checkpoints write
 * no interval after it until a later sweep has credited time. A sampler that stops (or is killed, or crash-loops)
 * after its first sweep and before its next checkpoint leaves the gap as the allocation's last record: no idle start,
 * so IdleStatus.stretches does not list it and the next sampler seeds nothing. That sampler starts the stretch over
 * silently (no STARTED_OVER audited), warns again, and the action waits for a fresh warn_after and grace, though the
 * samplers were down 20 s in all (ACCOUNTING.md: a restart within 10 min continues the stretch; warned once across
 * restarts).
 */
class ASamplerThatStopsBeforeItsFirstCheckpointDropsTheStretchTest {
    @TempDir
    Path dir;

    @Test
    void aSecondRestartSecondsAfterTheFirstStillContinuesTheStretch() {
        IdlePolicy p = Review42.policy(Duration.ofMinutes(10), Duration.ofMinutes(20), Duration.ofMinutes(8));
        try (AccountingNode node = Review42.node(dir, Duration.ofMinutes(1), p)) {
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("bob").build());
            List<IdleAction> before = node.run(Duration.ofSeconds(10), 6 * 12); // 12 min idle: warned at 10
            assertThat(before).extracting(IdleAction::action).as("%s", Review42.steps(before))
                    .contains(IdleStep.WARNED);
            node.stopSampler();
            node.clock.advance(Duration.ofSeconds(10));
            node.startSampler(); // restarted: it continues the stretch ...
            node.run(Duration.ofSeconds(10), 1); // ... sweeps once (the restart's gap) ...
            node.stopSampler(); // ... and stops again (a crash loop, a second restart)
            node.clock.advance(Duration.ofSeconds(10));
            node.startSampler();
            List<IdleAction> after = node.run(Duration.ofSeconds(10), 6 * 11); // 11 min
            assertThat(after).extracting(IdleAction::action)
                    .as("warned once at ~10 min; the samplers were down 20 s, so the third sampler continues the"
                            + " stretch (12 min idle, warned 2 min before): no second warning. After the second"
                            + " restart:%s", Review42.steps(after))
                    .doesNotContain(IdleStep.WARNED);
            assertThat(after).extracting(IdleAction::action)
                    .as("act_after 20 min and 8 min of grace after the warning are reached about 8 min after the"
                            + " second restart. After it:%s", Review42.steps(after))
                    .contains(IdleStep.RELEASED);
            assertThat(node.scheduler.allocations()).extracting(Allocation::id).doesNotContain(a.id());
        }
    }
}
