package io.gpusched.accounting.adversarial.accounting;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingSampler;
import io.gpusched.accounting.AccountingSettings;
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
import java.util.Locale;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The hook's {@code {step}} argument and the audit's action name are the same under any default locale: under a
 * Turkish one, {@code "SIGNALLED".toLowerCase()} is "sıgnalled" (a dotless i), which a hook script matching "signalled"
 * never saw.
 */
class PolicyTextUnderAnyLocaleTest {
    @TempDir
    Path dir;

    @Test
    void theHooksStepAndTheAuditsActionAreLocaleIndependent() {
        Locale was = Locale.getDefault();
        Locale.setDefault(Locale.forLanguageTag("tr-TR"));
        List<List<String>> hooks = new ArrayList<>();
        IdleEffects effects = new IdleEffects() {
            @Override
            public void notify(Allocation a, IdleStep step, Duration idleFor, String message) {
            }

            @Override
            public String release(Allocation a) {
                throw new IllegalStateException("not released in this test");
            }

            @Override
            public String signal(Allocation a, String signal) {
                return "sent SIG" + signal + " to its holder";
            }

            @Override
            public String runHook(Allocation a, List<String> argv) {
                hooks.add(argv);
                return "exit 0";
            }
        };
        IdlePolicy policy = new IdlePolicy(1, Duration.ofMinutes(5), Duration.ofMinutes(10), Duration.ofMinutes(20),
                IdlePolicy.Action.SIGNAL, "USR1", Duration.ofMinutes(8), List.of(), false,
                List.of("/usr/local/bin/idle-hook", "{step}", "{allocation}"));
        AccountingSettings settings = AccountingSettings.defaults().withCheckpoint(Duration.ofMinutes(1))
                .withIdle(policy);
        try (AccountingNode node = new AccountingNode(dir, settings)) {
            node.stopSampler();
            node.sampler = AccountingSampler.open(node.store, settings, node.inventory, node.attribution, effects,
                    node.clock).orElseThrow();
            node.scheduler.addListener(node.sampler);
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0));
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("ilker").build());
            List<IdleAction> steps = node.run(Duration.ofSeconds(10), 6 * 21);
            assertThat(hooks).extracting(h -> h.get(1)).as("the hook's {step}").containsExactly("warned",
                    "signalled");
            assertThat(hooks).extracting(h -> h.get(2)).containsOnly(a.id());
            IdleAction signalled = steps.stream().filter(s -> s.action() == IdleStep.SIGNALLED).findFirst()
                    .orElseThrow();
            assertThat(signalled.detail()).contains("gpu.idle.action signal, gpu.idle.signal USR1)");
        } finally {
            Locale.setDefault(was);
        }
    }
}
