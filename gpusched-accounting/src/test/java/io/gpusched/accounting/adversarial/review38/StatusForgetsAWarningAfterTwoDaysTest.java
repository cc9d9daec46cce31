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
 * "Every step is a record in the store, shown by report, report ID and status (idle 42 min (warned))"
 * (docs/ACCOUNTING.md). IdleStatus.read takes an allocation's last interval and its last step from yesterday's and
 * today's files only. With the default policy (action warn: warned once, never acted on) an allocation left idle over a
 * weekend is warned on its first day; from the day after next on, {@code gpusched status} and
 * {@code /api/v1/usage/idle} show it as "idle 50.0 h", no longer "(warned)", while the policy still holds it warned
 * (IdleWatch.warnedAt) and will not warn it again. The same for an act_after of more than a day: status drops the
 * warning while the action is still due.
 */
@Tag("adversarial")
class StatusForgetsAWarningAfterTwoDaysTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void statusStillSaysWarnedOnTheThirdDay() {
        IdlePolicy p = IdlePolicy.defaults(); // warned at 60 min idle, action warn
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofMinutes(10)).withIdle(p))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0)); // idle all along
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            List<IdleAction> steps = new ArrayList<>(node.run(Duration.ofMinutes(5), 24)); // 2 h
            assertThat(steps).as("alice warned on her first day").anyMatch(s -> s.action() == IdleStep.WARNED);
            steps.addAll(node.run(Duration.ofMinutes(5), 12 * 48)); // two more days, idle all along
            assertThat(node.sampler.idleWatch().warnedAt(a.id())).as("the policy holds alice warned").isPresent();
            IdleStatus st = IdleStatus.read(node.store, node.clock.instant()).get(a.id());
            assertThat(st).as("alice's idle status").isNotNull();
            assertThat(st.lastStep()).as("the policy's last step on alice in her idle status (%s), %s after her"
                    + " warning at %s", st.describe(),
                    Duration.between(
                            steps.stream().filter(s -> s.action() == IdleStep.WARNED).findFirst().orElseThrow().at(),
                            node.clock.instant()),
                    steps.stream().filter(s -> s.action() == IdleStep.WARNED).findFirst().orElseThrow().at())
                    .contains(IdleStep.WARNED);
        }
    }
}
