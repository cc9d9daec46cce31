package io.gpusched.accounting.adversarial.review42;

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
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * 90b4fb96 made a resumed policy count a warning only when it announced what this policy does ("the settings may change
 * across a restart"), but IdleWatch.resume counts any RELEASED, SIGNALLED or FAILED step as this policy's action
 * taken. Action signal (TERM): warned at 10 min, the job signalled at 20 min, ignores it and stays idle; the admin
 * switches gpu.idle.action to release and restarts the service. The restarted release policy neither warns of the
 * release (the signal's warning does not count) nor releases (acted = true): the idle GPU is never reclaimed, where a
 * release policy (restarted or not) warns then releases after the grace, and no release was ever taken before.
 */
class ASignalThenAReleasePolicyNeverReleasesTest {
    @TempDir
    Path dir;

    private static IdlePolicy policy(IdlePolicy.Action action) {
        return new IdlePolicy(1, Duration.ofMinutes(5), Duration.ofMinutes(10), Duration.ofMinutes(20), action, "TERM",
                Duration.ofMinutes(8), List.of(), false, List.of());
    }

    private static void open(AccountingNode node, AccountingSettings s, IdleEffects effects) {
        node.sampler = AccountingSampler.open(node.store, s, node.inventory, node.attribution, effects, node.clock)
                .orElseThrow();
        node.scheduler.addListener(node.sampler);
        node.sampler.knownLive(node.scheduler.allocations());
    }

    @Test
    void aReleasePolicyAfterASignalPolicyStillWarnsThenReleases() {
        AccountingSettings signal = AccountingSettings.defaults().withCheckpoint(Duration.ofMinutes(1))
                .withIdle(policy(IdlePolicy.Action.SIGNAL));
        AccountingSettings release = signal.withIdle(policy(IdlePolicy.Action.RELEASE));
        try (AccountingNode node = Review42.node(dir, Duration.ofMinutes(1), policy(IdlePolicy.Action.SIGNAL))) {
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
            open(node, signal, jobIgnoresSignals);
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("frank").build());
            List<IdleAction> before = node.run(Duration.ofSeconds(10), 6 * 21); // 21 min idle
            assertThat(before).extracting(IdleAction::action).as("%s", Review42.steps(before))
                    .contains(IdleStep.WARNED, IdleStep.SIGNALLED);
            assertThat(signalled).containsExactly("TERM");
            node.stopSampler();
            node.clock.advance(Duration.ofSeconds(10));
            open(node, release, new HostIdleEffects(node.scheduler)); // the admin: gpu.idle.action release
            List<IdleAction> after = node.run(Duration.ofSeconds(10), 6 * 10); // 10 min
            assertThat(after).extracting(IdleAction::action)
                    .as("idle 21 min and never released: the release policy warns of the release (the signal's"
                            + " warning is no warning of a release), then releases after the 8-min grace. After the"
                            + " restart:%s", Review42.steps(after))
                    .contains(IdleStep.WARNED, IdleStep.RELEASED);
            assertThat(node.scheduler.allocations()).extracting(Allocation::id).doesNotContain(a.id());
        }
    }
}
