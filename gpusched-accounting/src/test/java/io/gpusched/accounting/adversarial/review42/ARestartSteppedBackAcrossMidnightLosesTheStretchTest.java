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
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * IdleStatus.stretches reads the intervals of "yesterday and today" by the restarting sampler's clock, and the sampler
 * seeds a stretch only when the last interval read ends at the recovered tail. The previous sampler ran past UTC
 * midnight on a clock 3 minutes ahead (its last checkpoint at 00:01:05, in the new day's file); NTP stepped the clock
 * back to 23:58:05 while it was down. The restarted sampler reads the day before and the old day only: the stretch's
 * last interval there ends at midnight, not at the tail, so nothing is seeded. Once the clock passes the tail the meter
 * reports the allocation idle since its old idle start, and the policy starts a fresh state: flagged and warned a
 * second time in the same idle stretch, no STARTED_OVER audited, the samplers down a few seconds (a restart within
 * 10 minutes continues the stretch; the policy warns once).
 */
class ARestartSteppedBackAcrossMidnightLosesTheStretchTest {
    @TempDir
    Path dir;

    @Test
    void aRestartOnAClockSteppedBackOverMidnightContinuesTheStretch() {
        IdlePolicy warnOnly = new IdlePolicy(1, Duration.ofMinutes(5), Duration.ofMinutes(10), Duration.ofMinutes(20),
                IdlePolicy.Action.WARN, "TERM", Duration.ofMinutes(8), List.of(), false, List.of());
        try (AccountingNode node = Review42.node(dir, Duration.ofMinutes(1), warnOnly)) {
            node.clock.set(Instant.parse("2026-03-02T23:30:00Z"));
            node.sweep(); // a jump from 10:00: skipped
            node.clock.advance(Duration.ofSeconds(5));
            node.sweep();
            node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("gina").build());
            List<IdleAction> before = node.run(Duration.ofSeconds(10), 6 * 31); // to 00:01:05, idle all along
            assertThat(before).extracting(IdleAction::action).as("%s", Review42.steps(before))
                    .containsExactly(IdleStep.FLAGGED, IdleStep.WARNED);
            node.stopSampler();
            node.clock.set(node.clock.instant().minus(Duration.ofMinutes(3))); // 23:58:05: stepped back while down
            node.startSampler();
            List<IdleAction> after = node.run(Duration.ofSeconds(10), 6 * 16); // to 00:14:05
            assertThat(after).extracting(IdleAction::action)
                    .as("the same idle stretch, flagged and warned once before the restart (the samplers were down"
                            + " seconds): it is not flagged or warned again. After the restart:%s",
                            Review42.steps(after))
                    .doesNotContain(IdleStep.FLAGGED, IdleStep.WARNED);
        }
    }
}
