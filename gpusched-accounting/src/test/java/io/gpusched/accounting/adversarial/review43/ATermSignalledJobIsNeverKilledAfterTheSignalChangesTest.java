package io.gpusched.accounting.adversarial.review43;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingSampler;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.HostIdleEffects;
import io.gpusched.accounting.IdleEffects;
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
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * a3ffbca0 made a resumed policy count a RELEASED or SIGNALLED step as its action taken only when it is this policy's
 * action ("an action taken before the restart counts only when it is the restarted policy's action"), and a warning
 * counts only when it announced what this policy does: for action signal, which signal ("its job will get SIGTERM").
 * But a SIGNALLED step counts for any action signal, whatever the signal. A job sent SIGTERM that ignores it stays
 * idle; the admin changes gpu.idle.signal to KILL and restarts the service: the restarted policy does not count the
 * SIGTERM warning (it announced another signal), yet counts the SIGTERM as its SIGKILL taken, so it neither warns of
 * SIGKILL nor ever sends it. The idle GPU is held for good, where a KILL policy warns, then kills after the grace.
 */
class ATermSignalledJobIsNeverKilledAfterTheSignalChangesTest {
    @TempDir
    Path dir;

    private static AccountingSettings settings(String signal) {
        return AccountingSettings.defaults().withCheckpoint(Duration.ofMinutes(1)).withIdle(new IdlePolicy(1,
                Duration.ofMinutes(5), Duration.ofMinutes(10), Duration.ofMinutes(20), IdlePolicy.Action.SIGNAL,
                signal, Duration.ofMinutes(8), List.of(), false, List.of()));
    }

    private static void open(AccountingNode node, AccountingSettings s, IdleEffects effects) {
        node.sampler = AccountingSampler.open(node.store, s, node.inventory, node.attribution, effects, node.clock)
                .orElseThrow();
        node.scheduler.addListener(node.sampler);
        node.sampler.knownLive(node.scheduler.allocations());
    }

    @Test
    void aKillPolicyAfterATermPolicyWarnsOfTheKillThenSendsIt() {
        try (AccountingNode node = new AccountingNode(dir, settings("TERM"))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0));
            node.sweep();
            HostIdleEffects host = new HostIdleEffects(node.scheduler);
            List<String> signalled = new ArrayList<>();
            IdleEffects jobIgnoresSignals = new IdleEffects() {
                @Override
                public void notify(Allocation a, IdleStep step, Duration idleFor, String message) {
                    host.notify(a, step, idleFor, message);
                }

                @Override
                public String release(Allocation a) {
                    return host.release(a);
                }

                @Override
                public String signal(Allocation a, String sig) {
                    signalled.add(sig);
                    return "sent SIG" + sig + " to 1 process of " + a.id();
                }

                @Override
                public String runHook(Allocation a, List<String> argv) {
                    return host.runHook(a, argv);
                }
            };
            node.stopSampler();
            open(node, settings("TERM"), jobIgnoresSignals);
            node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("frank").build());
            List<IdleAction> before = node.run(Duration.ofSeconds(10), 6 * 21); // 21 min idle
            assertThat(before).extracting(IdleAction::action).contains(IdleStep.WARNED, IdleStep.SIGNALLED);
            assertThat(signalled).containsExactly("TERM");
            node.stopSampler();
            node.clock.advance(Duration.ofSeconds(10));
            open(node, settings("KILL"), jobIgnoresSignals); // the admin: gpu.idle.signal KILL
            List<IdleAction> after = node.run(Duration.ofSeconds(10), 6 * 10); // 10 min, still idle
            StringBuilder b = new StringBuilder();
            after.forEach(a -> b.append("\n  ").append(a.at()).append(' ').append(a.action()).append(' ')
                    .append(a.detail()));
            assertThat(signalled).as("idle 31 min, sent SIGTERM (ignored) at 20 min; the restarted policy's signal is"
                    + " KILL: it does not count the SIGTERM warning, so it must not count the SIGTERM as its SIGKILL"
                    + " either: warned of SIGKILL, then SIGKILL after the 8-min grace. Its steps after the restart:%s",
                    b.length() == 0 ? " (none)" : b).containsExactly("TERM", "KILL");
        }
    }
}
