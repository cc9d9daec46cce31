package io.gpusched.accounting.adversarial.review52;

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
 * docs/ACCOUNTING.md, "Idle allocations": "while the clock is behind a sweep already judged, the policy judges
 * nothing"; "a sampler restarted on a clock stepped back behind the store's last checkpoint judges nothing until the
 * clock passes it"; "A restarted sampler that sweeps as a running one would takes the same steps at the same sweeps,
 * and one killed (kill -9) at those points never flags, warns or acts sooner than the sampler that ran on".
 *
 * <p>An empty node is swept every 10 s up to L; the wall clock steps back 4 min 50 s; alice is granted an idle GPU
 * right after the sweep that saw it, and the node is swept every 10 s up to L - 30 s (checkpoints every minute). The
 * meter credits alice's new track from her grant, so the store holds about 4 min 20 s of idle intervals for her; the
 * policy that runs on judges none of that time (it is behind L) and counts her idle time from L on: flagged 2 min
 * after L. The sampler is stopped and started again at L - 30 s (or killed there), sweeping as the one that ran on
 * would. The policy wrote no count for alice (it never followed her), so the restarted one continues her stretch from
 * the intervals (the fallback "for a store without such a record (written by an earlier version)") and counts the
 * 4 min 20 s the running policy never judged: it judges nothing until its clock reaches L, as documented, but flags
 * her at L itself, 2 minutes sooner than the sampler that ran on. Found by a random search of restarts and kills with
 * clock steps back (every seed that granted while the clock was behind); the same search with grants only at or after
 * the latest sweep judged (and no step back right after a restart) found nothing in 1,500 scripts.
 */
class AGrantBehindTheClockIsCountedFromTheStoreAfterARestartTest {
    @TempDir
    Path dir;

    /** window 2 min, warn_after 4, act_after 30, grace 8; checkpoints every minute. */
    private static AccountingSettings settings() {
        return AccountingSettings.defaults().withCheckpoint(Duration.ofMinutes(1)).withIdle(new IdlePolicy(1,
                Duration.ofMinutes(2), Duration.ofMinutes(4), Duration.ofMinutes(30), IdlePolicy.Action.RELEASE,
                "TERM", Duration.ofMinutes(8), List.of(), false, List.of()));
    }

    private enum Down { NEVER, STOP, KILL }

    /** @return when alice was first flagged (null: never, in 15 minutes of sweeps after the restart point) */
    private static Instant flagged(Path dir, Down down, List<String> log) {
        AccountingSettings settings = settings();
        try (AccountingNode node = new AccountingNode(dir, settings)) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0)); // idle throughout
            node.sweep();
            node.run(Duration.ofSeconds(10), 30); // to L = T0 + 5 min, nothing allocated
            node.clock.advance(Duration.ofMinutes(-5).plusSeconds(10)); // the clock steps back: L - 4 min 50 s
            node.sweep();
            node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            for (IdleAction a : node.run(Duration.ofSeconds(10), 26)) { // to L - 30 s, behind L throughout
                log.add(a.action() + " at " + a.at());
            }
            if (down == Down.STOP) {
                node.restartSampler(); // a planned stop and start, no time lost
            } else if (down == Down.KILL) {
                AccountingStore copy = node.killedCopy(dir.resolve("killed"));
                node.scheduler.removeListener(node.sampler);
                node.sampler = AccountingSampler.open(copy, settings, node.inventory, node.attribution,
                        new HostIdleEffects(node.scheduler), node.clock).orElseThrow();
                node.scheduler.addListener(node.sampler);
                node.sampler.knownLive(node.scheduler.allocations());
            }
            for (int i = 0; i < 6 * 15; i++) {
                for (IdleAction a : node.run(Duration.ofSeconds(10), 1)) {
                    log.add(a.action() + " at " + a.at());
                    if (a.action() == IdleStep.FLAGGED) {
                        return a.at();
                    }
                }
            }
            return null;
        }
    }

    private void check(Down down) {
        List<String> ranOnLog = new ArrayList<>();
        Instant ranOn = flagged(dir.resolve("ran-on"), Down.NEVER, ranOnLog);
        assertThat(ranOn).as("the sampler that ran on flags alice: %s", ranOnLog).isNotNull();
        List<String> log = new ArrayList<>();
        Instant restarted = flagged(dir.resolve(down.name()), down, log);
        assertThat(restarted).as("an empty node swept to L = %s, the clock stepped back 4 min 50 s, alice granted an"
                + " idle GPU then and swept to L - 30 s (the policy judges nothing behind L), the sampler %s there and"
                + " sweeping as the one that ran on: expected alice flagged no sooner than by the sampler that ran on"
                + " (%s: it counts her idle time from L), but the restarted policy counted her intervals behind L and"
                + " flagged her at %s; its steps: %s", AccountingNode.T0.plusSeconds(300), down, ranOn, restarted, log)
                .isNotNull().isAfterOrEqualTo(ranOn);
    }

    @Test
    void aPlannedRestartDoesNotCountTheTimeThePolicyJudgedNothing() {
        check(Down.STOP);
    }

    @Test
    void aKilledSamplerDoesNotCountTheTimeThePolicyJudgedNothing() {
        check(Down.KILL);
    }
}
