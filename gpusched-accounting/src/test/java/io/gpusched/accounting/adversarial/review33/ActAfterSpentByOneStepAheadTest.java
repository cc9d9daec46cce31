package io.gpusched.accounting.adversarial.review33;

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
 * docs/ACCOUNTING.md, idle policy: "acted on once idle for {@code act_after} <b>and</b> at least {@code grace} of
 * observed time after its warning (... one sweep the wall clock stepped ahead ... cannot spend the grace at once)".
 * The grace is observed time, but the idle duration that {@code warn_after} and {@code act_after} are compared with is
 * still the wall clock's ({@code IdleWatch.evaluate}: {@code Duration.between(since, now)}), and a step ahead under
 * the 10-min jump bound is credited as one sweep (UsageMeter.observe). A clock 9 min 50 s slow, corrected by one step
 * 20 s into alice's idle stretch, warns her at once (idle "10 min") and releases her after the 5-min grace: about
 * 5 min 30 s of real idleness under act_after 15 min. Review28/30 attacked the grace only.
 */
@Tag("adversarial")
class ActAfterSpentByOneStepAheadTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void oneStepAheadDoesNotShortenActAfter() {
        IdlePolicy p = new IdlePolicy(1, Duration.ofMinutes(1), Duration.ofMinutes(10), Duration.ofMinutes(15),
                IdlePolicy.Action.RELEASE, "TERM", Duration.ofMinutes(5), List.of(), false, List.of());
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofMinutes(1)).withIdle(p))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 80)); // busy
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            List<IdleAction> steps = new ArrayList<>(node.run(Duration.ofSeconds(10), 6)); // busy 1 min
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0)); // idle from now on
            int realIdle = 0;
            steps.addAll(node.run(Duration.ofSeconds(10), 2));
            realIdle += 20;
            // the clock, 9 min 50 s slow, is stepped right: one sweep 10 min after the previous (under the jump bound)
            node.clock.advance(Duration.ofMinutes(9).plusSeconds(50));
            steps.addAll(node.run(Duration.ofSeconds(10), 1));
            realIdle += 10;
            int releasedAfter = -1;
            for (int i = 0; i < 84 && releasedAfter < 0; i++) { // 14 more minutes of real idleness, one sweep / 10 s
                steps.addAll(node.run(Duration.ofSeconds(10), 1));
                realIdle += 10;
                if (node.scheduler.allocations().stream().noneMatch(x -> x.id().equals(a.id()))) {
                    releasedAfter = realIdle;
                }
            }
            assertThat(releasedAfter).as("real seconds of idleness after which alice was released (-1: not within"
                    + " %d s; act_after 15 min); steps %s", realIdle,
                    steps.stream().map(s -> s.at() + " "
                            + s.action() + " " + s.detail()).toList())
                    .isEqualTo(-1);
        }
    }
}
