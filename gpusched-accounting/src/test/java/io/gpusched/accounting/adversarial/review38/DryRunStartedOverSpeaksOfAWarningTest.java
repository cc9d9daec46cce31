package io.gpusched.accounting.adversarial.review38;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.IdlePolicy;
import io.gpusched.accounting.IdleStep;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
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
 * Review34 fixed a dry run's BUSY_AGAIN audit, which said "(it was warned at ...)" of a holder never warned. Review36's
 * STARTED_OVER audit (IdleWatch.evaluate) has the same flaw: {@code s.warnedAt} is set in a dry run when the policy
 * would warn, and the audit of a stretch started over after a suspended host says "; the warning of <time> no longer
 * counts" whether or not a warning was sent. In a dry run none was ("dry run: would warn"); the store, `report ID` and
 * the console then say carol was warned.
 */
@Tag("adversarial")
class DryRunStartedOverSpeaksOfAWarningTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aDryRunsStartedOverDoesNotSpeakOfAWarning() {
        IdlePolicy p = new IdlePolicy(1, Duration.ofMinutes(1), Duration.ofMinutes(2), Duration.ofMinutes(30),
                IdlePolicy.Action.RELEASE, "TERM", Duration.ofMinutes(5), List.of(), true, List.of());
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofMinutes(1)).withIdle(p))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0)); // idle all along
            node.sweep();
            node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("carol").build());
            List<IdleAction> steps = new ArrayList<>();
            for (int i = 0; i < 200 && steps.stream().noneMatch(s -> s.action() == IdleStep.DRY_RUN); i++) {
                steps.addAll(node.run(Duration.ofSeconds(10), 1));
            }
            assertThat(steps).as("dry-run steps while idle").anyMatch(s -> s.action() == IdleStep.DRY_RUN
                    && s.detail().contains("would warn"));
            assertThat(steps).as("steps of a dry run").noneMatch(s -> s.action() == IdleStep.WARNED);
            node.clock.advance(Duration.ofHours(3)); // the host is suspended for 3 h
            steps.addAll(node.sweep());
            steps.addAll(node.run(Duration.ofSeconds(10), 3));
            List<IdleAction> over = steps.stream().filter(s -> s.action() == IdleStep.STARTED_OVER).toList();
            assertThat(over).as("STARTED_OVER audited after the suspension").isNotEmpty();
            assertThat(over).as("the STARTED_OVER audit of a dry run in which carol was never warned: %s",
                    over.stream().map(s -> s.at() + " " + s.detail()).toList())
                    .noneMatch(s -> s.detail().contains("warning of"));
        }
    }
}
