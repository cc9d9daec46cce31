package io.gpusched.accounting.adversarial.review34;

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
 * review28/33's cap ("each sweep counts at most as long as the sweep before it took", IdleWatch.observed) takes as
 * "the sweep before" the step from the last sweep IdleWatch judged, and the sampler never lets it judge a sweep the
 * meter skipped as a jump (AccountingSampler.sweep returns before {@code idle.evaluate}). After a suspended host (3 h)
 * the first sweep after the resume is 3 h 10 s after the last one IdleWatch saw: {@code lastStep} becomes 3 h. The
 * clock, off after the resume, is then stepped by NTP 9 min 50 s ahead (under the meter's 10-min jump bound): that
 * sweep is credited in full ({@code min(9m50s, 3h)}), alice is warned at once and released 5 min later: about 5 min
 * 20 s of observed idleness against act_after 15 min. Without the suspension the same NTP step counts 10 s (review33).
 */
@Tag("adversarial")
class ActAfterSpentByAStepAfterAResumeTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aStepAheadAfterAResumeDoesNotShortenActAfter() {
        IdlePolicy p = new IdlePolicy(1, Duration.ofMinutes(1), Duration.ofMinutes(10), Duration.ofMinutes(15),
                IdlePolicy.Action.RELEASE, "TERM", Duration.ofMinutes(5), List.of(), false, List.of());
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofMinutes(1)).withIdle(p))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 80)); // busy
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            List<IdleAction> steps = new ArrayList<>(node.run(Duration.ofSeconds(10), 6)); // busy 1 min
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0)); // her job ends; idle from now on
            node.clock.advance(Duration.ofHours(3)); // the host was suspended 3 h: the resume's sweep is a jump
            steps.addAll(node.sweep());
            steps.addAll(node.run(Duration.ofSeconds(10), 1));
            int observedIdle = 10;
            node.clock.advance(Duration.ofMinutes(9).plusSeconds(50)); // NTP steps the clock right after the resume
            steps.addAll(node.sweep());
            observedIdle += 10; // one sweep's worth of real time
            int releasedAfter = -1;
            for (int i = 0; i < 78 && releasedAfter < 0; i++) { // 13 more minutes, one sweep every 10 s
                steps.addAll(node.run(Duration.ofSeconds(10), 1));
                observedIdle += 10;
                if (node.scheduler.allocations().stream().noneMatch(x -> x.id().equals(a.id()))) {
                    releasedAfter = observedIdle;
                }
            }
            assertThat(releasedAfter).as("real seconds of observed idleness after the resume after which alice was"
                    + " released (-1: not within %d s; act_after 15 min); steps %s", observedIdle,
                    steps.stream().map(s -> s.at() + " " + s.action() + " " + s.detail()).toList())
                    .isEqualTo(-1);
            assertThat(steps).as("steps").noneMatch(s -> s.action() == IdleStep.RELEASED);
        }
    }
}
