package io.gpusched.accounting.adversarial.review52;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.Checkpoint;
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
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * docs/ACCOUNTING.md, "Idle allocations": a first sweep behind the last one its predecessor judged ("the latest of its
 * counts, of the allocations' last records and of the checkpoint markers' {@code judged}, written while the clock is
 * behind a sweep already judged, so a restart with no allocation live knows it too") is a step back; a restarted
 * sampler "never flags, warns or acts sooner than the sampler that ran on".
 *
 * <p>Review50's scenario (an empty node, the clock stepped back 4 min 50 s, the sampler restarted right after the
 * sweep that saw it, alice granted an idle GPU then), moved so that the step back crosses midnight: the last sweep
 * judged, L, is 00:02 on day D (D's journal has checkpoint markers at 00:00, 00:01, 00:02, none with {@code judged});
 * the clock steps back to 23:57:10 on D-1, and the markers that carry {@code judged = L} go to D-1's journal.
 * AccountingStore.recover reads the newest day with a marker (D) in full, and the day before it (D-1) for intervals
 * only, and marks it read; its extra read of "today's and yesterday's journals" (today is D-1 by the clock) then skips
 * D-1 as read. So the markers' {@code judged} is never seen, the restarted policy takes its own first sweep (behind L)
 * as judged, and flags alice about five minutes sooner than the sampler that ran on. On the same day (review50's test)
 * it passes.
 */
class AStepBackAcrossMidnightLosesTheJudgedMarkTest {
    @TempDir
    Path dir;

    /** 23:55 on 2026-03-02: the sampler's first sweep; L = 00:02 on 2026-03-03. */
    private static final Instant START = Instant.parse("2026-03-02T23:55:00Z");

    /** window 2 min, warn_after 4, act_after 30, grace 8; checkpoints every minute (review50's). */
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
            node.clock.set(START);
            node.sweep();
            node.run(Duration.ofSeconds(10), 42); // to L = 00:02:00 on D, nothing allocated
            node.clock.advance(Duration.ofMinutes(-5).plusSeconds(10)); // back across midnight: 23:57:10 on D-1
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
        assertThat(restarted).as("sweeps of an empty node to L = 00:02 on 2026-03-03, the clock stepped back 4 min"
                + " 50 s across midnight (23:57:10 on 2026-03-02), the sampler %s right after the sweep that saw it,"
                + " alice granted an idle GPU then: expected the restarted sampler to flag her no sooner than the one"
                + " that ran on (sweep %s: %s), as on the same day (review50); it flagged at sweep %s: %s (the"
                + " markers' judged, in 2026-03-02's journal, are not read: recover reads that day for intervals"
                + " only and skips it as today's)", down, ranOn, ranOnLog, restarted, log)
                .isGreaterThanOrEqualTo(ranOn);
    }

    @Test
    void aPlannedRestartBehindMidnightFlagsNoSoonerThanTheSamplerThatRanOn() {
        check(Down.STOP);
    }

    @Test
    void aKilledSamplerBehindMidnightFlagsNoSoonerThanTheOneThatRanOn() {
        check(Down.KILL);
    }

    /** The same at the store's level: the marker written on D-1 after markers on D is what recover must return. */
    @Test
    void recoverReturnsTheJudgedOfAMarkerInTheDayBeforeTheNewestMarkersDay() {
        AccountingStore s = AccountingStore.at(dir.resolve("store"));
        Instant l = Instant.parse("2026-03-03T00:02:00Z");
        Instant behind = Instant.parse("2026-03-02T23:57:10Z");
        try (AccountingStore.Writer w = s.openWriter().orElseThrow()) {
            w.append(List.of(new Checkpoint(Instant.parse("2026-03-02T23:59:00Z"), List.of())));
            w.append(List.of(new Checkpoint(Instant.parse("2026-03-03T00:01:00Z"), List.of())));
            w.append(List.of(new Checkpoint(l, List.of()))); // the last sweep judged, L
            w.append(List.of(new Checkpoint(behind, List.of(), Optional.of(l)))); // the clock stepped back
        }
        LocalDate today = LocalDate.parse("2026-03-02"); // by the clock, stepped back
        AccountingStore.Recovered r = s.recover(today.minusDays(400), today);
        assertThat(r.judged()).as("markers on 2026-03-03 (the last at L = %s) and then, the clock stepped back"
                + " across midnight, one at %s in 2026-03-02's journal with judged = L; recover(notBefore, today ="
                + " 2026-03-02) is documented to read the markers' judged of today's journal: expected judged = L",
                l, behind)
                .contains(l);
    }
}
