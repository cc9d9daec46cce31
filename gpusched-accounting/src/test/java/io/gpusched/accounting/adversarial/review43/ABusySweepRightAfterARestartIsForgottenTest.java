package io.gpusched.accounting.adversarial.review43;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingSampler;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.HostIdleEffects;
import io.gpusched.accounting.IdlePolicy;
import io.gpusched.accounting.IdleStep;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.GpuMetrics;
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
import java.util.OptionalDouble;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * "A restarted sampler's first sweep closes the gap of its downtime and credits nothing, but a GPU it reads busy is
 * busy again, as at any sweep; a sampler stopped again right after that first sweep (its last record a gap) leaves
 * the stretch to the next one". When that first sweep reads busy and the allocation was not flagged yet, nothing in
 * the store says so: the gap record carries no idle start but is what IdleStatus.stretches continues the stretch
 * across (Stretch.tail), the checkpoint of that sweep writes no interval (nothing credited), no BUSY_AGAIN is audited
 * (not flagged) and the policy, which dropped the stretch, writes no count; the turned-busy write (0e86d5f3) is skipped
 * on a checkpoint sweep. The next sampler continues the stretch from the count written before the busy sweep: idle 4
 * min counted, it flags 1 minute after its start, where the sampler that ran on flags 5 minutes after the busy sweep.
 * The same when the busy sweep is the restarted sampler's second (no checkpoint) and it is killed before its next
 * checkpoint: the last record written is the gap, which does not count as "a record that says idle" for the
 * turned-busy write, yet is continued as idle by the next sampler.
 */
class ABusySweepRightAfterARestartIsForgottenTest {
    @TempDir
    Path dir;

    private static AccountingSettings settings() {
        return AccountingSettings.defaults().withCheckpoint(Duration.ofMinutes(1)).withIdle(new IdlePolicy(1,
                Duration.ofMinutes(5), Duration.ofMinutes(10), Duration.ofMinutes(20), IdlePolicy.Action.RELEASE,
                "TERM", Duration.ofMinutes(8), List.of(), false, List.of()));
    }

    private static GpuMetrics busy(GpuMetrics m) {
        return new GpuMetrics(m.index(), OptionalDouble.of(95), m.memoryUsed(), m.temperatureCelsius(),
                m.powerWatts(), m.sampledAt(), m.energyMillijoules());
    }

    private static Instant flagged(List<IdleAction> steps) {
        return steps.stream().filter(a -> a.action() == IdleStep.FLAGGED).map(IdleAction::at).findFirst()
                .orElse(null);
    }

    /**
     * Idle 4 min, stopped, started 20 s later: its first sweep reads GPU 0 busy. Then, when {@code stopAgain}, stopped
     * at once and started 20 s later; else it runs on. Then idle sweeps every 10 s.
     */
    private static List<IdleAction> play(Path dir, boolean stopAgain, Instant[] busyAt) {
        try (AccountingNode node = new AccountingNode(dir, settings())) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0));
            node.sweep();
            node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            assertThat(node.run(Duration.ofSeconds(10), 6 * 4)).isEmpty(); // idle 4 min: not flagged yet
            node.stopSampler();
            node.clock.advance(Duration.ofSeconds(20));
            node.startSampler();
            busyAt[0] = node.clock.instant();
            assertThat(node.sweepWith(0, ABusySweepRightAfterARestartIsForgottenTest::busy)).isEmpty();
            if (stopAgain) {
                node.stopSampler();
                node.clock.advance(Duration.ofSeconds(20));
                node.startSampler();
            } else {
                node.clock.advance(Duration.ofSeconds(20));
            }
            List<IdleAction> steps = new ArrayList<>(node.sweep());
            for (int i = 0; i < 40 && flagged(steps) == null; i++) {
                steps.addAll(node.run(Duration.ofSeconds(10), 1));
            }
            return steps;
        }
    }

    @Test
    void theBusyFirstSweepEndsTheStretchForTheNextSamplerToo() {
        Instant[] busyAt = new Instant[1];
        Instant ranOn = flagged(play(dir.resolve("ran-on"), false, busyAt));
        assertThat(ranOn).isEqualTo(busyAt[0].plus(Duration.ofMinutes(5))); // idle again from the busy sweep
        List<IdleAction> restarted = play(dir.resolve("restarted"), true, busyAt);
        assertThat(flagged(restarted)).as("GPU 0 read busy at the restarted sampler's first sweep (%s), which ends the"
                + " stretch; stopped right after it and started 20 s later, the next sampler must not count the 4 min"
                + " idle before that busy sweep: flagged no sooner than the sampler that ran on (%s). Its steps:%s",
                busyAt[0], ranOn, restarted).isNotNull().isAfterOrEqualTo(ranOn);
    }

    @Test
    void aBusySecondSweepAfterARestartThenAKillIsNotCountedThrough() {
        Instant[] busyAt = new Instant[1];
        Instant ranOn = null;
        List<IdleAction> after = new ArrayList<>();
        for (boolean kill : new boolean[]{false, true}) {
            try (AccountingNode node = new AccountingNode(dir.resolve(kill ? "killed" : "ran-on2"), settings())) {
                node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0));
                node.sweep();
                node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
                assertThat(node.run(Duration.ofSeconds(10), 6 * 4)).isEmpty(); // idle 4 min: not flagged yet
                node.stopSampler();
                node.clock.advance(Duration.ofSeconds(20));
                node.startSampler();
                assertThat(node.sweep()).isEmpty(); // closes the gap (a checkpoint)
                node.clock.advance(Duration.ofSeconds(10));
                busyAt[0] = node.clock.instant();
                assertThat(node.sweepWith(0, ABusySweepRightAfterARestartIsForgottenTest::busy)).isEmpty();
                assertThat(node.run(Duration.ofSeconds(10), 2)).isEmpty(); // idle again; no checkpoint yet
                if (!kill) {
                    List<IdleAction> steps = new ArrayList<>();
                    for (int i = 0; i < 40 && flagged(steps) == null; i++) {
                        steps.addAll(node.run(Duration.ofSeconds(10), 1));
                    }
                    ranOn = flagged(steps);
                    continue;
                }
                // kill -9: the journals as they are; the next sampler sweeps 10 s later, then every 10 s
                Path crashed = dir.resolve("crashed").resolve(AccountingStore.DIR);
                copy(node.store.directory(), crashed);
                node.scheduler.removeListener(node.sampler);
                node.clock.advance(Duration.ofSeconds(10));
                try (AccountingSampler next = AccountingSampler.open(AccountingStore.at(crashed.getParent()),
                        settings(), node.inventory, node.attribution, new HostIdleEffects(node.scheduler),
                        node.clock).orElseThrow()) {
                    node.scheduler.addListener(next);
                    next.knownLive(node.scheduler.allocations());
                    after.addAll(next.sweep(node.inventory.sample(), node.scheduler.allocations()));
                    for (int i = 0; i < 40 && flagged(after) == null; i++) {
                        node.clock.advance(Duration.ofSeconds(10));
                        after.addAll(next.sweep(node.inventory.sample(), node.scheduler.allocations()));
                    }
                    node.scheduler.removeListener(next);
                }
            }
        }
        assertThat(ranOn).isEqualTo(busyAt[0].plus(Duration.ofMinutes(5)));
        assertThat(flagged(after)).as("GPU 0 read busy at %s, the restarted sampler's second sweep; killed 20 s later"
                + " (before its next checkpoint), the next sampler must not count the 4 min idle before that busy"
                + " sweep: flagged no sooner than the sampler that ran on (%s). Its steps:%s", busyAt[0], ranOn,
                after).isNotNull().isAfterOrEqualTo(ranOn);
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
