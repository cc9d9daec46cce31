package io.gpusched.accounting.adversarial.accounting;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingSampler;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.HostIdleEffects;
import io.gpusched.accounting.IdleEffects;
import io.gpusched.accounting.IdlePolicy;
import io.gpusched.accounting.IdleStep;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A failed action is not retried by the policy that tried it, even across a restart; but a policy whose action
 * changed across the restart has not tried its own: a signal that failed (nothing to signal) must not keep a release
 * policy from warning, then releasing (review43 noticed it beside its signal-then-kill finding).
 */
class FailedActionOfAnotherPolicyTest {
    @TempDir
    Path dir;

    private static AccountingSettings settings(IdlePolicy.Action action) {
        return settings(action, false);
    }

    private static AccountingSettings settings(IdlePolicy.Action action, boolean dryRun) {
        return AccountingSettings.defaults().withCheckpoint(Duration.ofMinutes(1)).withIdle(new IdlePolicy(1,
                Duration.ofMinutes(5), Duration.ofMinutes(10), Duration.ofMinutes(20), action, "TERM",
                Duration.ofMinutes(8), List.of(), dryRun, List.of()));
    }

    private static void restart(AccountingNode node, AccountingSettings s, IdleEffects effects) {
        node.stopSampler();
        node.sampler = AccountingSampler.open(node.store, s, node.inventory, node.attribution, effects, node.clock)
                .orElseThrow();
        node.scheduler.addListener(node.sampler);
        node.sampler.knownLive(node.scheduler.allocations());
    }

    @Test
    void aSignalThatFailedDoesNotStandForAReleasePolicysAction() {
        try (AccountingNode node = new AccountingNode(dir, settings(IdlePolicy.Action.SIGNAL))) {
            HostIdleEffects host = new HostIdleEffects(node.scheduler);
            IdleEffects nothingToSignal = new IdleEffects() {
                @Override
                public void notify(Allocation a, IdleStep step, Duration idleFor, String message) {
                }

                @Override
                public String release(Allocation a) {
                    return host.release(a);
                }

                @Override
                public String signal(Allocation a, String signal) {
                    throw new IllegalStateException("no process of " + a.id() + " to signal");
                }

                @Override
                public String runHook(Allocation a, List<String> argv) {
                    return "not run";
                }
            };
            restart(node, settings(IdlePolicy.Action.SIGNAL), nothingToSignal);
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0));
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("erin").build());
            List<IdleAction> before = node.run(Duration.ofSeconds(10), 6 * 21);
            assertThat(before).extracting(IdleAction::action).containsExactly(IdleStep.FLAGGED, IdleStep.WARNED,
                    IdleStep.FAILED);
            // the admin switches to release and restarts the service
            restart(node, settings(IdlePolicy.Action.RELEASE), host);
            List<IdleStep> after = new ArrayList<>();
            for (IdleAction s : node.run(Duration.ofSeconds(10), 6 * 10)) {
                after.add(s.action());
            }
            assertThat(after).as("warned of the release, then released after the grace").containsExactly(
                    IdleStep.WARNED, IdleStep.RELEASED);
            assertThat(node.scheduler.allocations()).extracting(Allocation::id).doesNotContain(a.id());
        }
    }

    @Test
    void aDryRunOfSignalSaysItWouldWarnOfTheSignalBeforeSayingItWouldSendIt() {
        try (AccountingNode node = new AccountingNode(dir, settings(IdlePolicy.Action.RELEASE, true))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0));
            node.sweep();
            node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("fay").build());
            List<IdleAction> before = node.run(Duration.ofSeconds(10), 6 * 21);
            assertThat(before).extracting(IdleAction::detail).anyMatch(d -> d.startsWith("dry run: would warn"))
                    .anyMatch(d -> d.startsWith("dry run: would release"));
            restart(node, settings(IdlePolicy.Action.SIGNAL, true), new HostIdleEffects(node.scheduler));
            List<String> after = new ArrayList<>();
            for (IdleAction s : node.run(Duration.ofSeconds(10), 6 * 10)) {
                after.add(s.detail());
            }
            assertThat(after).as("a dry run of signal: its own warning first, the grace, then the signal it would send")
                    .hasSize(2);
            assertThat(after.get(0)).startsWith("dry run: would warn").contains("SIGTERM");
            assertThat(after.get(1)).startsWith("dry run: would send SIGTERM");
        }
    }
}
