package io.gpusched.accounting.adversarial.review48;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingSampler;
import io.gpusched.accounting.AccountingSettings;
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
 * docs/ACCOUNTING.md: a sweep after the clock "jumped ahead and came back" measured nothing (the meter records the
 * time up to it as a gap) and the policy keeps the allocation's state; a sampler killed at any point never warns "twice
 * in one stretch" (only a kill more than 10 minutes after the stretch's last checkpoint starts it over, audited
 * STARTED_OVER). Here an idle allocation is warned; then the wall clock jumps 11 minutes ahead for one sweep (skipped
 * as a jump) and comes back, 10 s after the last checkpoint P; the sweep then writes a 10-s gap record at once. The
 * sampler is killed right after it. The store's last record for the allocation is now that gap, and the policy's
 * latest count (at P) is older than it, so IdleStatus.stretches drops the stretch (the rule meant for a sampler stopped
 * right after its first sweep: review43), and the next sampler starts the allocation's idle clock from scratch, with no
 * STARTED_OVER audited: it flags it again and warns its holder a second time in the same stretch, which the sampler
 * that ran on never does.
 */
class AKillAfterTheClockJumpedAndCameBackWarnsTwiceTest {
    @TempDir
    Path dir;

    /** window 2 min, warn_after 4, act_after 30, grace 8; checkpoints every minute. */
    private static AccountingSettings settings() {
        return AccountingSettings.defaults().withCheckpoint(Duration.ofMinutes(1)).withIdle(new IdlePolicy(1,
                Duration.ofMinutes(2), Duration.ofMinutes(4), Duration.ofMinutes(30), IdlePolicy.Action.RELEASE,
                "TERM", Duration.ofMinutes(8), List.of(), false, List.of()));
    }

    private static List<IdleAction> play(Path dir, boolean kill) {
        AccountingSettings settings = settings();
        List<IdleAction> all = new ArrayList<>();
        try (AccountingNode node = new AccountingNode(dir, settings)) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0)); // idle throughout
            node.sweep();
            node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            all.addAll(node.run(Duration.ofSeconds(10), 36)); // idle 6 min: flagged, warned; P = T0 + 6 min
            all.addAll(node.run(Duration.ofMinutes(11), 1)); // the clock jumps 11 min ahead: a sweep skipped
            node.clock.advance(Duration.ofMinutes(-11).plusSeconds(10)); // and comes back: P + 10 s
            all.addAll(node.sweep()); // measures nothing: a 10-s gap written now
            if (kill) { // kill -9 now; the next sampler sweeps when the one that ran on would, 10 s later
                AccountingStore copy = node.killedCopy(dir.resolve("killed"));
                node.scheduler.removeListener(node.sampler);
                node.sampler = AccountingSampler.open(copy, settings, node.inventory, node.attribution,
                        new HostIdleEffects(node.scheduler), node.clock).orElseThrow();
                node.scheduler.addListener(node.sampler);
                node.sampler.knownLive(node.scheduler.allocations());
            }
            all.addAll(node.run(Duration.ofSeconds(10), 6 * 10)); // 10 more minutes of idle sweeps
        }
        return all;
    }

    private static long warnings(List<IdleAction> steps) {
        return steps.stream().filter(a -> a.action() == IdleStep.WARNED).count();
    }

    @Test
    void theKilledSamplerDoesNotWarnAgainInTheSameStretch() {
        List<IdleAction> ranOn = play(dir.resolve("ran-on"), false);
        assertThat(warnings(ranOn)).as("the sampler that ran on warns once: %s", ranOn).isEqualTo(1);
        List<IdleAction> killed = play(dir.resolve("killed"), true);
        assertThat(warnings(killed)).as("idle and warned, the clock jumped 11 min ahead for one sweep and came back"
                + " 10 s after the last checkpoint (a 10-s gap written), the sampler killed there and continued 10 s"
                + " later: expected one warning in the stretch, as the sampler that ran on gives (%s); the killed"
                + " run's steps: %s", ranOn, killed)
                .isEqualTo(1);
    }
}
