package io.gpusched.accounting.adversarial.review46;

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
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * docs/ACCOUNTING.md: "A step back counts nothing, nor the step forward right after it, and while the clock is behind
 * a sweep already judged, the policy judges nothing"; a sampler killed at any point "never flags, warns or acts sooner
 * than the sampler that ran on". The wall clock steps back 95 s while an idle allocation is watched, and the sampler is
 * killed while the clock is still behind; the next one (started 10 s later, sweeping when the one that ran on would)
 * judges nothing until the clock passes the store's last checkpoint, as documented. But the sweep that passes it:
 * the policy that ran on counts nothing for that step (the first step forward past the sweep it judged last), while
 * the restarted policy, whose own first sweep was behind (it takes that sweep, not the store's last checkpoint, for
 * the latest it judged, and knows of no step back), counts it in full: here a sweep 30 s after the one before (late,
 * under the 30-s bound: T - 1 s to T + 29 s), of which the meter credited 29 s. It stays that far ahead for the rest
 * of the stretch and flags two sweeps (20 s) sooner than the sampler that ran on (with every sweep 10 s apart the
 * killed policy is 1 to 9 s ahead; a search of random kill scripts with clock steps back found flags and warnings a
 * sweep or two sooner too). Sweeps every 10 s; T is the last sweep judged before the step back.
 */
class AKillWhileTheClockIsBehindCountsTheStepPastTheCheckpointTest {
    @TempDir
    Path dir;

    private static AccountingSettings settings() {
        return AccountingSettings.defaults().withCheckpoint(Duration.ofMinutes(1)).withIdle(new IdlePolicy(1,
                Duration.ofMinutes(5), Duration.ofMinutes(10), Duration.ofMinutes(30), IdlePolicy.Action.RELEASE,
                "TERM", Duration.ofMinutes(8), List.of(), false, List.of()));
    }

    private static Instant firstFlagged(Path dir, boolean kill, List<IdleAction> all) {
        AccountingSettings settings = settings();
        try (AccountingNode node = new AccountingNode(dir, settings)) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0)); // idle throughout
            node.sweep();
            node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            all.addAll(node.run(Duration.ofSeconds(10), 6 * 3)); // idle 3 min (a checkpoint at its last sweep)
            node.clock.advance(Duration.ofSeconds(-91)); // the wall clock steps back 91 s (T - 91 s)
            all.addAll(node.sweep());
            all.addAll(node.run(Duration.ofSeconds(10), 4)); // T - 51 s: behind the last sweep judged (T)
            if (kill) { // kill -9 now; the next sampler's first sweep comes when the running one's next would
                AccountingStore copy = node.killedCopy(dir.resolve("killed"));
                node.scheduler.removeListener(node.sampler);
                node.sampler = AccountingSampler.open(copy, settings, node.inventory, node.attribution,
                        new HostIdleEffects(node.scheduler), node.clock).orElseThrow();
                node.scheduler.addListener(node.sampler);
                node.sampler.knownLive(node.scheduler.allocations());
            }
            for (int i = 0; i < 6 * 10; i++) {
                // the sweep that passes the last judged sweep comes 30 s after the one before (a late sweep, under
                // the policy's 30-s bound): at T + 29 s, the one before at T - 1 s
                all.addAll(node.run(Duration.ofSeconds(i == 5 ? 30 : 10), 1));
                Instant f = all.stream().filter(a -> a.action() == IdleStep.FLAGGED).map(IdleAction::at).findFirst()
                        .orElse(null);
                if (f != null) {
                    return f;
                }
            }
            return null;
        }
    }

    @Test
    void theKilledSamplerFlagsNoSoonerThanTheOneThatRanOn() {
        List<IdleAction> ranOnSteps = new ArrayList<>();
        Instant ranOn = firstFlagged(dir.resolve("ran-on"), false, ranOnSteps);
        assertThat(ranOn).as("the sampler that ran on flags: %s", ranOnSteps).isNotNull();
        List<IdleAction> killedSteps = new ArrayList<>();
        Instant killed = firstFlagged(dir.resolve("killed"), true, killedSteps);
        assertThat(killed).as("idle 3 min (to T), the clock stepped back 91 s, the sampler killed at T - 51 s"
                + " (behind its last judged sweep) and continued by one sweeping when the one that ran on does, every"
                + " 10 s, the sweep past T late (T - 1 s to T + 29 s): expected flagged no sooner than the sampler"
                + " that ran on (%s); steps of the killed run: %s", ranOn, killedSteps)
                .isNotNull().isAfterOrEqualTo(ranOn);
    }
}
