package io.gpusched.accounting.adversarial.review45;

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
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * review43 dated the counts written at a stop max(clock, last sweep), so that a clock stepped back since the last
 * sweep does not date them before the intervals they go with; review44 (3b2e9f69) dates them by the last sweep alone.
 * But the last sweep may itself have been taken on the clock stepped back: the policy judges nothing then and the
 * meter credits nothing, yet {@code lastSweepMillis} follows the clock. Checkpoints every 5 minutes; idle from 10:00;
 * the sampler is down 10:02 to 10:07 (so the policy's count stays under the wall clock's bound); at 10:14:50 (9m50s
 * counted; the last checkpoint, with its count, at 10:12) the clock steps back 2m10s, the sampler sweeps three
 * times on it (10:12:40 to 10:13:00: nothing judged) and is stopped, then started again at once on the same clock.
 * The stop's intervals end at 10:14:50 but its count (9m50s) is dated 10:13:00, the latest count of the stretch: the
 * next policy takes it and adds, by the bound, the 1m50s of intervals after its date, which the count already holds:
 * it warns about 1.5 minutes before the sampler that ran on ("a restarted sampler that sweeps as a running one would takes the same steps at the same sweeps"). (A
 * checkpoint taken on that clock dates its counts the same way: {@code idle.counts(now)} in
 * AccountingSampler.sweep; the second test: a kill right after such a checkpoint.)
 */
class AStopAfterSweepsOnAClockSteppedBackDatesTheCountBeforeItsIntervalsTest {
    @TempDir
    Path dir;

    private static AccountingSettings settings() {
        return AccountingSettings.defaults().withCheckpoint(Duration.ofMinutes(5)).withIdle(new IdlePolicy(1,
                Duration.ofMinutes(5), Duration.ofMinutes(15), Duration.ofMinutes(40), IdlePolicy.Action.RELEASE,
                "TERM", Duration.ofMinutes(8), List.of(), false, List.of()));
    }

    private static Instant warned(List<IdleAction> steps) {
        return steps.stream().filter(a -> a.action() == IdleStep.WARNED).map(IdleAction::at).findFirst()
                .orElse(null);
    }

    private static List<IdleAction> play(Path dir, boolean restarts) {
        try (AccountingNode node = new AccountingNode(dir, settings())) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0));
            node.sweep();
            node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            List<IdleAction> steps = new ArrayList<>(node.run(Duration.ofSeconds(10), 12)); // to 10:02:00
            node.stopSampler(); // both: down 5 min (the policy's count then stays under the wall clock's)
            node.clock.advance(Duration.ofMinutes(5));
            node.startSampler();
            steps.addAll(node.sweep()); // 10:07:00
            steps.addAll(node.run(Duration.ofSeconds(10), 47)); // to 10:14:50: 9m50s counted, 14m50s by the wall
            assertThat(steps).extracting(IdleAction::action).containsExactly(IdleStep.FLAGGED);
            node.clock.set(node.clock.instant().minus(Duration.ofMinutes(2)).minus(Duration.ofSeconds(20)));
            steps.addAll(node.run(Duration.ofSeconds(10), 3)); // 10:12:40 to 10:13:00: behind, nothing judged
            if (restarts) {
                node.restartSampler(); // a planned stop and start, at once, on the same clock
            }
            for (int i = 0; i < 6 * 30 && warned(steps) == null; i++) {
                steps.addAll(node.run(Duration.ofSeconds(10), 1));
            }
            return steps;
        }
    }

    @Test
    void theRestartedPolicyWarnsNoSoonerThanTheOneThatRanOn() {
        Instant ranOn = warned(play(dir.resolve("ran-on"), false));
        assertThat(ranOn).isNotNull();
        List<IdleAction> restarted = play(dir.resolve("restarted"), true);
        // the restart's first sweep counts nothing; 30 s of slack besides
        assertThat(warned(restarted)).as("a planned restart after three sweeps on a clock stepped back 2m10s (nothing"
                + " judged at them): expected warned no sooner than the sampler that ran on (%s, less 30 s); its"
                + " steps:%s", ranOn, restarted).isNotNull().isAfterOrEqualTo(ranOn.minus(Duration.ofSeconds(30)));
    }

    /**
     * The same clock stepped back, 4m50s at 10:14:50, sweeps going on: the checkpoint due 5 minutes after 10:12:00
     * comes on the clock behind, at 10:12:20; its intervals end at 10:14:50 (the meter's last credited sweep) but its
     * counts are dated 10:12:20. A kill -9 right after: the next sampler takes that count and adds the 2m30s of
     * intervals after its date, which it already holds.
     */
    @Test
    void aKillAfterACheckpointOnAClockSteppedBackWarnsNoSoonerThanTheSamplerThatRanOn() {
        Instant ranOn = null;
        List<IdleAction> after = new ArrayList<>();
        for (boolean kill : new boolean[]{false, true}) {
            try (AccountingNode node = new AccountingNode(dir.resolve(kill ? "killed" : "ran-on-2"), settings())) {
                node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0));
                node.sweep();
                node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
                List<IdleAction> steps = new ArrayList<>(node.run(Duration.ofSeconds(10), 12)); // to 10:02:00
                node.stopSampler(); // down 5 min (the policy's count then stays under the wall clock's)
                node.clock.advance(Duration.ofMinutes(5));
                node.startSampler();
                steps.addAll(node.sweep()); // 10:07:00
                steps.addAll(node.run(Duration.ofSeconds(10), 47)); // to 10:14:50: 9m50s counted
                node.clock.set(node.clock.instant().minus(Duration.ofMinutes(4)).minus(Duration.ofSeconds(50)));
                steps.addAll(node.run(Duration.ofSeconds(10), 14)); // 10:10:10 to 10:12:20: the checkpoint at the last
                if (!kill) {
                    for (int i = 0; i < 6 * 30 && warned(steps) == null; i++) {
                        steps.addAll(node.run(Duration.ofSeconds(10), 1));
                    }
                    ranOn = warned(steps);
                    continue;
                }
                Path crashed = dir.resolve("crashed").resolve(AccountingStore.DIR); // kill -9: the journals as they are
                copy(node.store.directory(), crashed);
                node.scheduler.removeListener(node.sampler);
                node.clock.advance(Duration.ofSeconds(10));
                try (AccountingSampler next = AccountingSampler.open(AccountingStore.at(crashed.getParent()),
                        settings(), node.inventory, node.attribution, new HostIdleEffects(node.scheduler),
                        node.clock).orElseThrow()) {
                    node.scheduler.addListener(next);
                    next.knownLive(node.scheduler.allocations());
                    after.addAll(next.sweep(node.inventory.sample(), node.scheduler.allocations()));
                    for (int i = 0; i < 6 * 30 && warned(after) == null; i++) {
                        node.clock.advance(Duration.ofSeconds(10));
                        after.addAll(next.sweep(node.inventory.sample(), node.scheduler.allocations()));
                    }
                    node.scheduler.removeListener(next);
                }
            }
        }
        assertThat(ranOn).isNotNull();
        assertThat(warned(after)).as("killed right after a checkpoint taken on a clock stepped back 4m50s (its counts"
                + " dated before the intervals it wrote): expected the next sampler to warn no sooner than the one that"
                + " ran on (%s, less 30 s); its steps:%s", ranOn, after).isNotNull()
                .isAfterOrEqualTo(ranOn.minus(Duration.ofSeconds(30)));
    }

    private static void copy(Path from, Path to) {
        try {
            Files.createDirectories(to);
            try (DirectoryStream<Path> ds = Files.newDirectoryStream(from, "*.{log,sum}")) {
                for (Path p : ds) {
                    Files.copy(p, to.resolve(p.getFileName()));
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
