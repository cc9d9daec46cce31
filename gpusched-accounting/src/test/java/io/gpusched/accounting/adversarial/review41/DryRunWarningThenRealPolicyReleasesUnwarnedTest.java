package io.gpusched.accounting.adversarial.review41;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingSampler;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.HostIdleEffects;
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
 * An admin tries the policy as a dry run, sees what it would do, and turns it on (gpu.idle.dry_run = false) with a
 * restart of the service 30 s later. The resumed stretch takes the dry run's "would warn" step as a warning
 * (IdleWatch.resume sets warnedAt from it), so the real policy releases the allocation without ever having warned its
 * owner: no WARNED step, no notice. The docs: "an action is never taken ... without a warning first"; a dry run
 * "sends ... nothing".
 */
class DryRunWarningThenRealPolicyReleasesUnwarnedTest {
    @TempDir
    Path dir;

    @Test
    void aDryRunsWouldWarnDoesNotCountAsTheWarningOfTheRealPolicyAfterARestart() {
        AccountingSettings dry = Review41.settings(Review41.policy(IdlePolicy.Action.RELEASE, true),
                Duration.ofMinutes(1));
        AccountingSettings real = Review41.settings(Review41.policy(IdlePolicy.Action.RELEASE, false),
                Duration.ofMinutes(1));
        try (AccountingNode node = Review41.node(dir, dry)) {
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            List<IdleAction> before = node.run(Duration.ofSeconds(10), 6 * 12); // 12 min: the dry run would warn
            assertThat(before).extracting(IdleAction::action).as("%s", Review41.steps(before))
                    .contains(IdleStep.DRY_RUN);
            node.stopSampler();
            node.clock.advance(Duration.ofSeconds(30));
            // the service restarted with the dry run turned off
            HostIdleEffects effects = new HostIdleEffects(node.scheduler).listener(node.notices::add);
            node.sampler = AccountingSampler.open(node.store, real, node.inventory, node.attribution, effects,
                    node.clock).orElseThrow();
            node.scheduler.addListener(node.sampler);
            node.sampler.knownLive(node.scheduler.allocations());
            List<IdleAction> after = new ArrayList<>();
            for (int m = 0; m < 30 && node.scheduler.allocations().stream().anyMatch(x -> x.id().equals(a.id())); m++) {
                after.addAll(node.run(Duration.ofSeconds(10), 6));
            }
            assertThat(after).extracting(IdleAction::action)
                    .as("the real policy must warn alice (a WARNED step, a notice) before it releases her"
                            + " allocation; the dry run's 'would warn' sent nothing. Steps after the restart: %s",
                            Review41.steps(after))
                    .containsSubsequence(IdleStep.WARNED, IdleStep.RELEASED);
        }
    }

    /**
     * The same cause, the other step: the dry run "would release" after 20 min; turned on, the real policy takes
     * that as an action already taken (resume sets acted from any DRY_RUN step that is not a "would warn") and never
     * warns nor releases the allocation, idle for another 30 min ("restarted ..., the policy still warns and acts").
     */
    @Test
    void aDryRunsWouldReleaseDoesNotCountAsAnActionTakenByTheRealPolicyAfterARestart() {
        AccountingSettings dry = Review41.settings(Review41.policy(IdlePolicy.Action.RELEASE, true),
                Duration.ofMinutes(1));
        AccountingSettings real = Review41.settings(Review41.policy(IdlePolicy.Action.RELEASE, false),
                Duration.ofMinutes(1));
        try (AccountingNode node = Review41.node(dir, dry)) {
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("bob").build());
            List<IdleAction> before = node.run(Duration.ofSeconds(10), 6 * 22); // 22 min: would warn, would release
            assertThat(before.stream().filter(x -> x.action() == IdleStep.DRY_RUN)).as("%s",
                    Review41.steps(before)).hasSize(2);
            Review41.restartWith(node, Duration.ofSeconds(30), real);
            List<IdleAction> after = Review41.runUntilReleased(node, a.id(), 30);
            assertThat(after).extracting(IdleAction::action)
                    .as("turned on, the real policy must warn bob and release the allocation (idle 22 min, then"
                            + " 30 min more); a dry run released nothing. Steps after the restart: %s",
                            Review41.steps(after))
                    .containsSubsequence(IdleStep.WARNED, IdleStep.RELEASED);
        }
    }
}
