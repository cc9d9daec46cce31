package io.gpusched.accounting.adversarial.review44;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingSampler;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.HostIdleEffects;
import io.gpusched.accounting.IdlePolicy;
import io.gpusched.accounting.IdleStep;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * "A warning counts across a restart only when it announced what the restarted policy does ... an action taken before
 * the restart counts only when it is the restarted policy's action" (docs/ACCOUNTING.md). IdleWatch.resume applies
 * both to real steps (the warning's consequence, RELEASED only for release, SIGNALLED only for the same signal,
 * FAILED only for the policy that tried it), but takes any DRY_RUN step for a dry run's own: a dry run of action
 * release that audited "would warn ... it will be released" and "would release", restarted as a dry run of action
 * signal (the admin trying the other action before turning it on), counts that warning as its warning and "would
 * release" as its action taken, and never audits that it would warn of, or send, SIGTERM, which the same dry run
 * started fresh (or a running one) audits.
 */
class ADryRunOfAnotherActionCountsAcrossARestartTest {
    @TempDir
    Path dir;

    private static AccountingSettings settings(IdlePolicy.Action action) {
        return AccountingSettings.defaults().withCheckpoint(Duration.ofMinutes(1)).withIdle(new IdlePolicy(1,
                Duration.ofMinutes(2), Duration.ofMinutes(4), Duration.ofMinutes(6), action, "TERM",
                Duration.ofMinutes(1), List.of(), true, List.of()));
    }

    @Test
    void aDryRunOfSignalAfterADryRunOfReleaseSaysItWouldSendTheSignal() {
        try (AccountingNode node = new AccountingNode(dir, settings(IdlePolicy.Action.RELEASE))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0));
            node.sweep();
            node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            List<IdleAction> before = node.run(Duration.ofSeconds(10), 6 * 7);
            assertThat(before).extracting(IdleAction::detail).anyMatch(d -> d.startsWith("dry run: would release"));
            node.stopSampler();
            node.clock.advance(Duration.ofSeconds(20));
            List<IdleAction> after = new ArrayList<>();
            try (AccountingSampler next = AccountingSampler.open(node.store, settings(IdlePolicy.Action.SIGNAL),
                    node.inventory, node.attribution, new HostIdleEffects(node.scheduler), node.clock)
                    .orElseThrow()) {
                node.scheduler.addListener(next);
                next.knownLive(node.scheduler.allocations());
                for (int i = 0; i < 6 * 10; i++) {
                    node.clock.advance(Duration.ofSeconds(10));
                    after.addAll(next.sweep(node.inventory.sample(), node.scheduler.allocations()));
                }
                node.scheduler.removeListener(next);
            }
            assertThat(after).as("restarted as a dry run of action signal: the dry run of release's warning announced"
                    + " a release and its 'would release' is not this policy's action; expected it to audit that it"
                    + " would warn of SIGTERM and then would send SIGTERM, as a fresh dry run of signal does; its"
                    + " steps:%s (before the restart:%s)", after, before)
                    .filteredOn(a -> a.action() == IdleStep.DRY_RUN)
                    .extracting(IdleAction::detail).anyMatch(d -> d.startsWith("dry run: would send SIGTERM"));
        }
    }
}
