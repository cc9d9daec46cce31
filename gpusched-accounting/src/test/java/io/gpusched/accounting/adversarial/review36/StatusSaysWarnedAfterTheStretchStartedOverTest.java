package io.gpusched.accounting.adversarial.review36;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.IdlePolicy;
import io.gpusched.accounting.IdleStatus;
import io.gpusched.accounting.IdleStep;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Since 3f917e0d, after a gap of more than 10 minutes no sweep measured (a suspended host) "the policy starts over
 * too: flagged and warned again before any action, a warning from before the gap no longer counts", and "every step
 * is a record in the store, shown by report, report ID and status (idle 42 min (warned))" (docs/ACCOUNTING.md).
 * IdleWatch drops the old state silently (evaluate: {@code s = null}, nothing audited), so the store's last step for
 * alice stays the WARNED of the old stretch, and IdleStatus.describe (what `gpusched status` and /api/v1/usage/idle
 * show) says "idle 1 min (warned)" for a stretch in which she was not warned and the policy will warn her again: she
 * is told a release is due in the grace when none is.
 */
@Tag("adversarial")
class StatusSaysWarnedAfterTheStretchStartedOverTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void statusDoesNotSayWarnedForAStretchThePolicyStartedOver() {
        IdlePolicy p = new IdlePolicy(1, Duration.ofMinutes(5), Duration.ofMinutes(10), Duration.ofMinutes(15),
                IdlePolicy.Action.RELEASE, "TERM", Duration.ofMinutes(5), List.of(), false, List.of());
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofMinutes(1)).withIdle(p))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0)); // idle all along
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            List<IdleAction> steps = new ArrayList<>();
            for (int i = 0; i < 200 && steps.stream().noneMatch(s -> s.action() == IdleStep.WARNED); i++) {
                steps.addAll(node.run(Duration.ofSeconds(10), 1));
            }
            assertThat(steps).as("alice idle").anyMatch(s -> s.action() == IdleStep.WARNED);
            node.clock.advance(Duration.ofHours(3)); // the host is suspended for 3 h
            steps.addAll(node.sweep());
            steps.addAll(node.run(Duration.ofSeconds(10), 9)); // 90 s after the resume: under the 5-min window
            assertThat(node.sampler.idleWatch().warnedAt(a.id())).as("the policy's warning for alice's new idle"
                    + " stretch (review34: a warning from before the gap no longer counts)").isEmpty();
            Instant now = node.clock.instant();
            Optional<IdleStatus> st = Optional.ofNullable(IdleStatus.read(node.store, now).get(a.id()));
            assertThat(st).as("alice's idle status after the resume").isPresent();
            assertThat(st.get().describe()).as("status for alice 90 s after a 3-h suspension, the policy having"
                    + " started her idle stretch over (not warned in it); idle since %s, steps: %s",
                    st.get().idleSince(), steps.stream().map(s -> s.at() + " " + s.action()).toList())
                    .doesNotContain("warned");
        }
    }
}
