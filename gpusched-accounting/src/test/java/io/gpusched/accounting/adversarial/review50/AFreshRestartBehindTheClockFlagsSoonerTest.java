package io.gpusched.accounting.adversarial.review50;

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
 * docs/ACCOUNTING.md, "Idle allocations": "A step back counts nothing ... while the clock is behind a sweep already
 * judged, the policy judges nothing"; "a first sweep behind the last one its predecessor judged (the latest of its
 * counts and of the allocations' last records, whether or not a stretch was open) is a step back"; "A restarted sampler
 * that sweeps as a running one would takes the same steps at the same sweeps, and one killed (kill -9) at those points
 * never flags, warns or acts sooner than the sampler that ran on".
 *
 * <p>The sampler sweeps an empty node (every 10 s) up to L; the wall clock steps back 4 min 50 s and the sampler is
 * restarted (a planned stop, or kill -9) right after the sweep that saw the step; alice is then granted an idle GPU.
 * The sampler that ran on judges nothing until its clock passes L (the running IdleWatch keeps L as the mark to pass
 * whether or not any allocation was live) and flags alice 2 minutes of counted idle time after that. The restarted one
 * learns L from nothing (IdleWatch.judgedUpTo takes only the allocations' last records and the counts, and there were
 * no allocations), judges from its first sweep, and flags alice about 5 minutes sooner.
 */
class AFreshRestartBehindTheClockFlagsSoonerTest {
    @TempDir
    Path dir;

    /** window 2 min, warn_after 4, act_after 30, grace 8; checkpoints every minute. */
    private static AccountingSettings settings() {
        return AccountingSettings.defaults().withCheckpoint(Duration.ofMinutes(1)).withIdle(new IdlePolicy(1,
                Duration.ofMinutes(2), Duration.ofMinutes(4), Duration.ofMinutes(30), IdlePolicy.Action.RELEASE,
                "TERM", Duration.ofMinutes(8), List.of(), false, List.of()));
    }

    private enum Down { NEVER, STOP, KILL }

    /** @return the index of the sweep (after the grant) that flagged alice, -1 when none did */
    private static int flaggedAt(Path dir, Down down, List<String> log) {
        AccountingSettings settings = settings();
        try (AccountingNode node = new AccountingNode(dir, settings)) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0)); // idle throughout
            node.sweep();
            node.run(Duration.ofSeconds(10), 30); // to L = T0 + 5 min, nothing allocated
            node.clock.advance(Duration.ofMinutes(-5).plusSeconds(10)); // the clock steps back: L - 4 min 50 s
            node.sweep();
            if (down == Down.STOP) {
                node.restartSampler();
            } else if (down == Down.KILL) {
                AccountingStore copy = node.killedCopy(dir.resolve("killed"));
                node.scheduler.removeListener(node.sampler);
                node.sampler = AccountingSampler.open(copy, settings, node.inventory, node.attribution,
                        new HostIdleEffects(node.scheduler), node.clock).orElseThrow();
                node.scheduler.addListener(node.sampler);
                node.sampler.knownLive(node.scheduler.allocations());
            }
            node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            for (int i = 0; i < 6 * 15; i++) {
                for (IdleAction a : node.run(Duration.ofSeconds(10), 1)) {
                    log.add(a.action() + "@" + i + " (" + a.at() + ")");
                    if (a.action() == IdleStep.FLAGGED) {
                        return i;
                    }
                }
            }
            return -1;
        }
    }

    private void check(Down down) {
        List<String> ranOnLog = new ArrayList<>();
        int ranOn = flaggedAt(dir.resolve("ran-on"), Down.NEVER, ranOnLog);
        assertThat(ranOn).as("the sampler that ran on flags alice: %s", ranOnLog).isGreaterThan(0);
        List<String> log = new ArrayList<>();
        int restarted = flaggedAt(dir.resolve(down.name()), down, log);
        assertThat(restarted).as("the clock stepped back 4 min 50 s behind the last sweep judged, the sampler "
                + "%s right after the sweep that saw it (no allocation live: no record, no count), alice granted an"
                + " idle GPU then: expected the restarted sampler to flag her no sooner than the one that ran on"
                + " (sweep %s: %s); it flagged at sweep %s: %s", down, ranOn, ranOnLog, restarted, log)
                .isGreaterThanOrEqualTo(ranOn);
    }

    @Test
    void aPlannedRestartFlagsNoSoonerThanTheSamplerThatRanOn() {
        check(Down.STOP);
    }

    @Test
    void aKilledSamplerFlagsNoSoonerThanTheOneThatRanOn() {
        check(Down.KILL);
    }
}
