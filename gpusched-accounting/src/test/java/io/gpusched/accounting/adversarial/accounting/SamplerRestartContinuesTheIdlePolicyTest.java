package io.gpusched.accounting.adversarial.accounting;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.IdlePolicy;
import io.gpusched.accounting.IdleStatus;
import io.gpusched.accounting.IdleStatusAccess;
import io.gpusched.accounting.IdleStep;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A restarted sampler continues each idle stretch from the store (review36's judged finding, fixed): restarted every
 * few minutes, the policy still flags, warns and acts; the time the sampler was down counts for nothing (not for the
 * idle time, not for the grace after a warning); a restart after more than 10 minutes down starts the stretch over,
 * audited; an action taken before the restart is not taken again.
 */
class SamplerRestartContinuesTheIdlePolicyTest {
    @TempDir
    Path dir;

    private static IdlePolicy policy(IdlePolicy.Action action) {
        return new IdlePolicy(1, Duration.ofMinutes(5), Duration.ofMinutes(10), Duration.ofMinutes(20), action,
                "TERM", Duration.ofMinutes(8), List.of(), false, List.of());
    }

    private static AccountingNode node(Path dir, IdlePolicy p) {
        AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofMinutes(1)).withIdle(p));
        node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0)); // idle all along
        node.sweep();
        return node;
    }

    /** Sweeps every 10 s for {@code minutes}, restarting the sampler every {@code every} minutes, down {@code down}. */
    private static List<IdleAction> run(AccountingNode node, int minutes, int every, Duration down) {
        List<IdleAction> steps = new ArrayList<>();
        for (int m = 1; m <= minutes; m++) {
            steps.addAll(node.run(Duration.ofSeconds(10), 6));
            if (m % every == 0) {
                node.stopSampler();
                node.clock.advance(down);
                node.startSampler();
            }
        }
        return steps;
    }

    @Test
    void aSamplerRestartedEveryFewMinutesStillWarnsThenActsAfterTheSampledGrace() {
        try (AccountingNode node = node(dir, policy(IdlePolicy.Action.RELEASE))) {
            Instant granted = node.clock.instant();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            List<IdleAction> steps = run(node, 60, 4, Duration.ofSeconds(30));
            assertThat(steps).extracting(IdleAction::action).containsSubsequence(IdleStep.WARNED, IdleStep.RELEASED);
            Instant warned = steps.stream().filter(s -> s.action() == IdleStep.WARNED).findFirst().orElseThrow().at();
            Instant released = steps.stream().filter(s -> s.action() == IdleStep.RELEASED).findFirst().orElseThrow()
                    .at();
            // sampled time only: 30 s down every 4 min; warn_after 10 min of it, act_after 20, grace 8 after the warning
            assertThat(Duration.between(granted, warned)).as("warned after 10 min of sampled idleness")
                    .isGreaterThanOrEqualTo(Duration.ofMinutes(10).plusSeconds(60));
            assertThat(Duration.between(warned, released)).as("the grace after the warning, the restarts' downtime"
                    + " not counted").isGreaterThanOrEqualTo(Duration.ofMinutes(8).plusSeconds(60));
            assertThat(steps.stream().filter(s -> s.action() == IdleStep.WARNED)).as("warned once").hasSize(1);
            assertThat(node.scheduler.allocations()).extracting(Allocation::id).doesNotContain(a.id());
        }
    }

    @Test
    void aRestartAfterMoreThanTenMinutesDownStartsTheStretchOver() {
        try (AccountingNode node = node(dir, policy(IdlePolicy.Action.RELEASE))) {
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("bob").build());
            List<IdleAction> steps = new ArrayList<>(run(node, 12, 100, Duration.ZERO));
            assertThat(steps).extracting(IdleAction::action).contains(IdleStep.WARNED);
            node.stopSampler();
            node.clock.advance(Duration.ofMinutes(11));
            node.startSampler();
            List<IdleAction> after = run(node, 3, 100, Duration.ZERO);
            assertThat(after).extracting(IdleAction::action).as("%s", after).containsExactly(IdleStep.STARTED_OVER);
            assertThat(node.sampler.idleWatch().warnedAt(a.id())).isEmpty();
            IdleStatus st = IdleStatus.read(node.store, node.clock.instant()).get(a.id());
            assertThat(st == null ? "" : st.describe()).doesNotContain("warned");
        }
    }

    @Test
    void aWarningThatAnnouncedAnotherActionOrADryRunsIsNoWarningForTheRestartedPolicy() {
        for (IdlePolicy before : List.of(policy(IdlePolicy.Action.WARN), new IdlePolicy(1, Duration.ofMinutes(5),
                Duration.ofMinutes(10), Duration.ofMinutes(20), IdlePolicy.Action.RELEASE, "TERM",
                Duration.ofMinutes(8), List.of(), true, List.of()))) {
            Path d = dir.resolve(before.dryRun() ? "dry" : "warn");
            Allocation a;
            try (AccountingNode node = node(d, before)) {
                a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("dave").build());
                List<IdleAction> steps = run(node, 12, 100, Duration.ZERO);
                assertThat(steps).extracting(IdleAction::action).containsAnyOf(IdleStep.WARNED, IdleStep.DRY_RUN);
                // the service restarts with action release, no dry run: the policy resumed from the store as the
                // restarted sampler resumes it
                assertThat(IdleStatusAccess.warnedAfterResume(policy(IdlePolicy.Action.RELEASE), node.store,
                        node.clock.instant(), a.id())).as("a warning of %s is no warning of a release",
                                before.dryRun() ? "a dry run" : "action warn")
                        .isEmpty();
            }
        }
    }

    @Test
    void anActionTakenBeforeTheRestartIsNotTakenAgain() {
        try (AccountingNode node = node(dir, policy(IdlePolicy.Action.WARN))) {
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("carol").build());
            List<IdleAction> steps = run(node, 30, 3, Duration.ofSeconds(20));
            assertThat(steps.stream().filter(s -> s.action() == IdleStep.FLAGGED)).as("%s", steps).hasSize(1);
            assertThat(steps.stream().filter(s -> s.action() == IdleStep.WARNED)).as("%s", steps).hasSize(1);
            assertThat(steps).extracting(IdleAction::action).doesNotContain(IdleStep.STARTED_OVER);
            assertThat(node.scheduler.allocations()).extracting(Allocation::id).contains(a.id());
        }
    }
}
