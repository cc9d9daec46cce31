package io.gpusched.accounting.adversarial.review34;

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
 * "A dry run audits what it would do and does nothing (no warning is sent ...)" (IdleWatch; docs/ACCOUNTING.md,
 * {@code gpu.idle.dry_run}), and every step is audited. In a dry run IdleWatch still sets {@code s.warnedAt} when it
 * would warn, and the BUSY_AGAIN audit reads it as a warning sent: "busy again: left alone (it was warned at ...)".
 * Carol was never warned (the audit itself says "dry run: would warn"); the store's audit then says she was. An
 * administrator trying the policy in a dry run reads, in {@code gpusched report}, that users were warned.
 */
@Tag("adversarial")
class DryRunBusyAgainSaysItWasWarnedTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aDryRunsBusyAgainDoesNotSayItWasWarned() {
        IdlePolicy p = new IdlePolicy(1, Duration.ofMinutes(1), Duration.ofMinutes(5), Duration.ofMinutes(15),
                IdlePolicy.Action.RELEASE, "TERM", Duration.ofMinutes(5), List.of(), true, List.of());
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofMinutes(1)).withIdle(p))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0)); // idle
            node.sweep();
            node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("carol").build());
            List<IdleAction> steps = new ArrayList<>();
            for (int i = 0; i < 100 && steps.stream().noneMatch(s -> s.action() == IdleStep.DRY_RUN); i++) {
                steps.addAll(node.run(Duration.ofSeconds(10), 1));
            }
            assertThat(steps).as("dry-run steps while idle").anyMatch(s -> s.action() == IdleStep.DRY_RUN
                    && s.detail().contains("would warn"));
            assertThat(steps).as("steps of a dry run").noneMatch(s -> s.action() == IdleStep.WARNED);
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 90)); // her job computes again
            steps.addAll(node.run(Duration.ofSeconds(10), 3));
            List<IdleAction> busy = steps.stream().filter(s -> s.action() == IdleStep.BUSY_AGAIN).toList();
            assertThat(busy).as("BUSY_AGAIN audited").isNotEmpty();
            assertThat(busy).as("the BUSY_AGAIN audit of a dry run in which carol was never warned: %s",
                    busy.stream().map(s -> s.at() + " " + s.detail()).toList())
                    .noneMatch(s -> s.detail().contains("warned at"));
        }
    }
}
