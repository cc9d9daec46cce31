package io.gpusched.accounting.adversarial.review41;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingSampler;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.HostIdleEffects;
import io.gpusched.accounting.IdlePolicy;
import io.gpusched.accounting.IdleStatus;
import io.gpusched.accounting.IdleStep;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
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
 * Warned after 10 min idle, the job gets busy again (BUSY_AGAIN, written at once), idles again, and the sampler is
 * killed before its next checkpoint; it is back 20 s later. The store's last interval still says "idle since the
 * grant", and the stretch IdleStatus.stretches continues holds the BUSY_AGAIN step: IdleWatch.resume clears the flags
 * but keeps the whole stretch's time as idle time (idleObserved from the old start), so the first sweep after the
 * restart flags and warns an allocation idle for about 2 minutes since its busy spell, and it is released about
 * 8 minutes later, not after act_after (20 min) of idleness. Status shows it idle since the grant too.
 */
class BusyAgainBeforeACrashIsCountedAsIdleTest {
    @TempDir
    Path dir;

    @Test
    void aBusySpellAuditedBeforeACrashEndsTheStretchTheRestartedPolicyContinues() {
        AccountingSettings s = Review41.settings(Review41.policy(IdlePolicy.Action.RELEASE, false),
                Duration.ofMinutes(10));
        try (AccountingNode node = Review41.node(dir.resolve("node"), s)) {
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            List<IdleAction> before = new ArrayList<>(node.run(Duration.ofSeconds(10), 6 * 12)); // 12 min idle
            assertThat(before).extracting(IdleAction::action).as("%s", Review41.steps(before))
                    .contains(IdleStep.WARNED);
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 90)); // busy for 30 s
            before.addAll(node.run(Duration.ofSeconds(10), 3));
            assertThat(before).extracting(IdleAction::action).as("%s", Review41.steps(before))
                    .contains(IdleStep.BUSY_AGAIN);
            Instant busyEnded = node.clock.instant();
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0)); // idle again
            before.addAll(node.run(Duration.ofSeconds(10), 6)); // 1 min, then kill -9 (no checkpoint since ~10 min)
            Path crashed = dir.resolve("crashed");
            Review41.copyTree(node.store.directory(), crashed.resolve(AccountingStore.DIR));
            node.scheduler.removeListener(node.sampler);
            node.clock.advance(Duration.ofSeconds(20));
            AccountingStore store = AccountingStore.at(crashed);
            List<IdleAction> after = new ArrayList<>();
            try (AccountingSampler next = AccountingSampler.open(store, s, node.inventory, node.attribution,
                    new HostIdleEffects(node.scheduler), node.clock).orElseThrow()) {
                node.scheduler.addListener(next);
                next.knownLive(node.scheduler.allocations());
                for (int i = 0; i < 6 * 2; i++) { // 2 min after the restart
                    node.clock.advance(Duration.ofSeconds(10));
                    after.addAll(next.sweep(node.inventory.sample(), node.scheduler.allocations()));
                }
                Duration idleSinceBusy = Duration.between(busyEnded, node.clock.instant());
                assertThat(after).extracting(IdleAction::action)
                        .as("idle only %s since its busy spell (BUSY_AGAIN audited before the crash): neither"
                                + " flagged (window 5 min) nor warned (warn_after 10 min) yet. Before: %s%nAfter: %s",
                                idleSinceBusy, Review41.steps(before), Review41.steps(after))
                        .doesNotContain(IdleStep.FLAGGED, IdleStep.WARNED, IdleStep.RELEASED);
                IdleStatus st = IdleStatus.read(store, node.clock.instant()).get(a.id());
                assertThat(st == null ? Duration.ZERO : st.idleFor())
                        .as("status: idle since the busy spell ended, not since the grant (%s)", st)
                        .isLessThanOrEqualTo(idleSinceBusy.plusSeconds(10));
            }
        }
    }
}
