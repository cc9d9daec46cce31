package io.gpusched.accounting.adversarial.review38;

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
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review36: a stretch the policy started over after a suspended host "is audited STARTED_OVER (so status and the
 * console no longer show the old warning)". IdleWatch audits it only for {@code s.flagged && !s.acted}: a job already
 * signalled (action signal: the allocation stays) has its state dropped silently after the suspension, and the policy
 * will flag, warn and signal it again in the new stretch; meanwhile the store's last step is still the SIGNALLED of
 * the stretch before, and `gpusched status` says "idle 1 min (signalled)" for a stretch nothing signalled.
 */
@Tag("adversarial")
class SignalledThenSuspendedStatusSaysSignalledTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void statusDoesNotShowTheSignalOfAStretchThePolicyStartedOver() {
        IdlePolicy p = new IdlePolicy(1, Duration.ofMinutes(2), Duration.ofMinutes(3), Duration.ofMinutes(5),
                IdlePolicy.Action.SIGNAL, "USR1", Duration.ofMinutes(1), List.of(), false, List.of());
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofSeconds(30)).withIdle(p))) {
            SignallingNode.Effects effects = new SignallingNode.Effects();
            SignallingNode.install(node, effects);
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0)); // idle all along
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("dave").build());
            List<IdleAction> steps = new ArrayList<>();
            for (int i = 0; i < 200 && steps.stream().noneMatch(s -> s.action() == IdleStep.SIGNALLED); i++) {
                steps.addAll(node.run(Duration.ofSeconds(10), 1));
            }
            assertThat(steps).as("dave's job signalled").anyMatch(s -> s.action() == IdleStep.SIGNALLED);
            steps.addAll(node.run(Duration.ofSeconds(10), 3));
            node.clock.advance(Duration.ofHours(3)); // the host is suspended for 3 h
            steps.addAll(node.sweep());
            steps.addAll(node.run(Duration.ofSeconds(10), 9)); // 90 s after the resume: under the 2-min window
            IdleStatus st = IdleStatus.read(node.store, node.clock.instant()).get(a.id());
            assertThat(st).as("dave's idle status after the resume").isNotNull();
            assertThat(st.describe()).as("status for dave 90 s after a 3-h suspension, the policy having started his"
                    + " idle stretch over (idle since %s; steps: %s)", st.idleSince(),
                    steps.stream()
                            .map(s -> s.at() + " " + s.action()).toList())
                    .doesNotContain("signalled");
            // (added with the fix) and the start-over is audited, for the store's trail as for status
            assertThat(steps).as("STARTED_OVER audited for the signalled allocation after the suspension")
                    .anyMatch(s -> s.action() == IdleStep.STARTED_OVER);
        }
    }
}
