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
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * docs/ACCOUNTING.md, "Idle allocations": "A restarted sampler that sweeps as a running one would takes the same steps
 * at the same sweeps", and never flags sooner; a first sweep behind the last sweep its predecessor judged is a step
 * back; and "a sampler restarted on a clock stepped back behind the store's last checkpoint judges nothing until the
 * clock passes it". AccountingRecord.Checkpoint drops a {@code judged} "not after {@code at}" as saying "nothing
 * more", but the reader deliberately does not take a marker's {@code at} as judged (reviews 44, 45), so a judged equal
 * to (or before) the marker's time is information lost.
 *
 * <p>An empty node is swept every 10 s up to L; the sampler is stopped there (a planned stop right after its last
 * sweep: close() writes a marker at L whose judged, L, is not after its at and is dropped); while it is down the wall
 * clock is stepped back 4 min 50 s (a reboot whose clock is behind until NTP, an operator's step); it is started again
 * and sweeps when the sampler that ran on would (the one that ran on sees the same step back at its next sweep); alice
 * is granted an idle GPU. The sampler that ran on judges nothing until its clock passes L; the restarted one learns
 * L from nothing (no allocation, no count, no marker's judged) and flags alice about five minutes sooner.
 *
 * <p>The same after a kill -9 right after the sweep at L, a checkpoint sweep: its marker (at L) was written in the
 * batch that follows the policy's judgement of L (AccountingSampler.sweep writes after IdleWatch.evaluate), so unlike a
 * stop's marker on a clock stepped ahead (reviews 44, 45) its time is a sweep judged; no sweep is lost to the kill, yet
 * the successor, started behind L, flags sooner.
 */
class AStopThenAStepBackWhileDownFlagsSoonerTest {
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
            node.run(Duration.ofSeconds(10), 30); // to L = T0 + 5 min (a checkpoint sweep), nothing allocated
            AccountingStore killed = null;
            if (down == Down.STOP) {
                node.stopSampler(); // a planned stop at L, right after the sweep at L
            } else if (down == Down.KILL) {
                killed = node.killedCopy(dir.resolve("killed")); // kill -9 right after the sweep at L
                node.scheduler.removeListener(node.sampler);
            }
            node.clock.advance(Duration.ofMinutes(-5).plusSeconds(10)); // the clock steps back: L - 4 min 50 s
            if (down == Down.STOP) {
                node.startSampler();
            } else if (down == Down.KILL) {
                node.sampler = AccountingSampler.open(killed, settings, node.inventory, node.attribution,
                        new HostIdleEffects(node.scheduler), node.clock).orElseThrow();
                node.scheduler.addListener(node.sampler);
                node.sampler.knownLive(node.scheduler.allocations());
            }
            node.sweep(); // the first sweep behind L (the restarted sampler's first)
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

    private void check(Down down, String how) {
        List<String> ranOnLog = new ArrayList<>();
        int ranOn = flaggedAt(dir.resolve("ran-on"), Down.NEVER, ranOnLog);
        assertThat(ranOn).as("the sampler that ran on flags alice: %s", ranOnLog).isGreaterThan(0);
        List<String> log = new ArrayList<>();
        int restarted = flaggedAt(dir.resolve(down.name()), down, log);
        assertThat(restarted).as("sweeps of an empty node to L, %s, the clock stepped back 4 min 50 s while down,"
                + " the sampler started and sweeping as the one that ran on, alice granted an idle GPU: expected the"
                + " restarted sampler to flag her no sooner than the one that ran on (sweep %s: %s); it flagged at"
                + " sweep %s: %s", how, ranOn, ranOnLog, restarted, log)
                .isGreaterThanOrEqualTo(ranOn);
    }

    @Test
    void aStopAtTheLastSweepThenAClockSteppedBackWhileDownFlagsNoSooner() {
        check(Down.STOP, "a planned stop right after the sweep at L (its marker's judged, L, equals its at and is"
                + " dropped)");
    }

    @Test
    void aKillRightAfterACheckpointSweepThenAClockSteppedBackWhileDownFlagsNoSooner() {
        check(Down.KILL, "kill -9 right after the sweep at L, a checkpoint sweep (its marker, at L, written after L"
                + " was judged)");
    }
}
