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
 * With {@code action: signal} the allocation outlives the action (a job that checkpoints on SIGUSR1 and goes on, or
 * ignores SIGTERM). "Busy again at any sweep: left alone, audited BUSY_AGAIN, its clock starts over"
 * (docs/ACCOUNTING.md; IdlePolicy: "audited as BUSY_AGAIN when it had been flagged"). IdleWatch audits BUSY_AGAIN only
 * for {@code s.flagged && !s.acted}: after SIGNALLED, the job computing again is dropped silently. The store's last
 * step stays SIGNALLED, so when the job idles again `gpusched status` shows "idle 1 min (signalled)" for a stretch
 * nothing signalled (the same stale-status flaw review36 fixed for STARTED_OVER), until the window flags it anew.
 */
@Tag("adversarial")
class SignalledThenBusyAgainIsNotAuditedTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aSignalledJobBusyAgainIsAuditedAndStatusForgetsTheSignal() {
        IdlePolicy p = new IdlePolicy(1, Duration.ofMinutes(2), Duration.ofMinutes(3), Duration.ofMinutes(5),
                IdlePolicy.Action.SIGNAL, "USR1", Duration.ofMinutes(1), List.of(), false, List.of());
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofSeconds(30)).withIdle(p))) {
            SignallingNode.Effects effects = new SignallingNode.Effects();
            SignallingNode.install(node, effects);
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0)); // idle
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("dave").build());
            List<IdleAction> steps = new ArrayList<>();
            for (int i = 0; i < 200 && steps.stream().noneMatch(s -> s.action() == IdleStep.SIGNALLED); i++) {
                steps.addAll(node.run(Duration.ofSeconds(10), 1));
            }
            assertThat(steps).as("dave's job signalled").anyMatch(s -> s.action() == IdleStep.SIGNALLED);
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 85)); // it took the signal, computes
            List<IdleAction> after = new ArrayList<>(node.run(Duration.ofSeconds(10), 6));
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0)); // idle again, under the window
            after.addAll(node.run(Duration.ofSeconds(10), 6));
            IdleStatus st = IdleStatus.read(node.store, node.clock.instant()).get(a.id());
            assertThat(after).as("the policy's steps after dave's signalled job computed again for a minute (then"
                    + " idled again; status now says: %s): %s", st == null ? "-" : st.describe(),
                    after.stream().map(s -> s.action() + " " + s.detail()).toList())
                    .anyMatch(s -> s.action() == IdleStep.BUSY_AGAIN);
        }
    }
}
