package io.gpusched.accounting.adversarial.review42;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingSampler;
import io.gpusched.accounting.AccountingStore;
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
 * Review41's fix ends a stretch at a BUSY_AGAIN audited after its last checkpoint, but the policy audits BUSY_AGAIN
 * only for an allocation it had flagged. A job idle 4 min (under the 5-min window), busy for 20 s, idle again, with
 * the sampler killed before its next checkpoint: the store has no trace of the busy spell, its last interval says
 * "idle since the grant", and the restarted policy counts the 4 min before the busy spell as idle time. It flags the
 * allocation about a minute after the restart, idle about 2 minutes since its busy spell; the same trace never
 * restarted (or restarted after a checkpoint) starts the idle clock at the busy spell and flags it 5 min after it. With
 * the defaults (window 30 min, warn_after 60) a job busy for a minute after 29 idle ones is warned 29 min early.
 */
class AnUnflaggedBusySpellBeforeACrashIsCountedAsIdleTest {
    @TempDir
    Path dir;

    private static final IdlePolicy POLICY = Review42.policy(Duration.ofMinutes(10), Duration.ofMinutes(20),
            Duration.ofMinutes(8));

    /** 4 min idle (checkpoints every minute, the last at 4 min), 20 s busy, 30 s idle: no checkpoint since. */
    private static List<IdleAction> trace(AccountingNode node) {
        node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("erin").build());
        List<IdleAction> steps = new ArrayList<>(node.run(Duration.ofSeconds(10), 24));
        node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 90));
        steps.addAll(node.run(Duration.ofSeconds(10), 2));
        node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0));
        steps.addAll(node.run(Duration.ofSeconds(10), 3));
        return steps;
    }

    @Test
    void aBusySpellTheCrashLostStillEndsTheIdleStretch() {
        try (AccountingNode control = Review42.node(dir.resolve("control"), Duration.ofMinutes(1), POLICY)) {
            List<IdleAction> steps = trace(control);
            control.clock.advance(Duration.ofSeconds(10));
            steps.addAll(control.run(Duration.ofSeconds(10), 18));
            assertThat(steps).extracting(IdleAction::action)
                    .as("the control (never restarted): idle 3.5 min since its busy spell:%s", Review42.steps(steps))
                    .doesNotContain(IdleStep.FLAGGED);
        }
        try (AccountingNode node = Review42.node(dir.resolve("node"), Duration.ofMinutes(1), POLICY)) {
            List<IdleAction> before = trace(node);
            assertThat(before).extracting(IdleAction::action).as("%s", Review42.steps(before))
                    .doesNotContain(IdleStep.FLAGGED);
            // kill -9: the journals as they are, no last checkpoint; back 10 s later
            Path crashed = dir.resolve("crashed");
            Review42.copyTree(node.store.directory(), crashed.resolve(AccountingStore.DIR));
            node.scheduler.removeListener(node.sampler);
            node.clock.advance(Duration.ofSeconds(10));
            AccountingStore store = AccountingStore.at(crashed);
            List<IdleAction> after = new ArrayList<>();
            try (AccountingSampler next = AccountingSampler.open(store, node.settings, node.inventory,
                    node.attribution, new HostIdleEffects(node.scheduler), node.clock).orElseThrow()) {
                node.scheduler.addListener(next);
                next.knownLive(node.scheduler.allocations());
                for (int i = 0; i < 18; i++) { // 3 min after the restart
                    node.clock.advance(Duration.ofSeconds(10));
                    after.addAll(next.sweep(node.inventory.sample(), node.scheduler.allocations()));
                }
                node.scheduler.removeListener(next);
            }
            assertThat(after).extracting(IdleAction::action)
                    .as("busy 20 s at 4 min, then idle about 3.5 min until the end: not flagged (window 5 min), as"
                            + " the same trace never restarted is not. After the restart:%s", Review42.steps(after))
                    .doesNotContain(IdleStep.FLAGGED, IdleStep.WARNED);
        }
    }
}
