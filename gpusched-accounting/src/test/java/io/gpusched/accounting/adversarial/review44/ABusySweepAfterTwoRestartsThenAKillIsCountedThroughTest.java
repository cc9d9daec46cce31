package io.gpusched.accounting.adversarial.review44;

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
 * review43 fixed "a busy second sweep after a restart, then a kill" by no longer resetting Track.recordedIdle at a
 * gap record written by a running meter (UsageMeter.close). A meter resumed from a gap record (UsageMeter.start) still
 * sets recordedIdle from the tail's idle start, which a gap record never has, though the store continues the stretch
 * across that trailing gap (a count of it at the gap's end). Two restarts in a row: sampler A idle 4 min (not flagged),
 * stopped; sampler B, 20 s later, sweeps once (idle; its checkpoint writes the count at the gap's end) and is stopped;
 * sampler C, 20 s later, continues the stretch (right), sweeps once (idle, a checkpoint with a count), then reads GPU 0
 * busy at its second sweep: its track says the store does not say idle, so no turned-busy interval is written; C is
 * killed before its next checkpoint. The store's last records are the two gaps and a count at the second one's end: the
 * next sampler continues A's stretch through the busy sweep and flags about 3.5 minutes before the sampler that ran on
 * (idle again from the busy sweep).
 */
class ABusySweepAfterTwoRestartsThenAKillIsCountedThroughTest {
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

    @Test
    void theSamplerAfterTheKillFlagsNoSoonerThanTheOneThatRanOn() {
        Instant busyAt = null;
        Instant ranOn = null;
        List<IdleAction> after = new ArrayList<>();
        for (boolean restarts : new boolean[]{false, true}) {
            try (AccountingNode node = new AccountingNode(dir.resolve(restarts ? "restarted" : "ran-on"),
                    settings())) {
                node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0));
                node.sweep();
                node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
                assertThat(node.run(Duration.ofSeconds(10), 6 * 4)).isEmpty(); // A: idle 4 min, not flagged yet
                if (restarts) {
                    node.stopSampler();
                }
                node.clock.advance(Duration.ofSeconds(20));
                if (restarts) {
                    node.startSampler(); // B
                }
                assertThat(node.sweep()).isEmpty(); // B's first sweep: closes the gap, idle (a checkpoint, a count)
                if (restarts) {
                    node.stopSampler();
                }
                node.clock.advance(Duration.ofSeconds(20));
                if (restarts) {
                    node.startSampler(); // C: continues the stretch (a count at the gap's end)
                }
                assertThat(node.sweep()).isEmpty(); // C's first sweep: idle, a checkpoint, a count
                node.clock.advance(Duration.ofSeconds(10));
                busyAt = node.clock.instant();
                assertThat(node.sweepWith(0, ABusySweepAfterTwoRestartsThenAKillIsCountedThroughTest::busy))
                        .isEmpty(); // C's second sweep: busy (not flagged: no BUSY_AGAIN); no checkpoint
                assertThat(node.run(Duration.ofSeconds(10), 1)).isEmpty(); // idle again; no checkpoint yet
                if (!restarts) {
                    List<IdleAction> steps = new ArrayList<>();
                    for (int i = 0; i < 60 && flagged(steps) == null; i++) {
                        steps.addAll(node.run(Duration.ofSeconds(10), 1));
                    }
                    ranOn = flagged(steps);
                    continue;
                }
                // kill -9 of C: the journals as they are; the next sampler sweeps 10 s later, then every 10 s
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
                    for (int i = 0; i < 60 && flagged(after) == null; i++) {
                        node.clock.advance(Duration.ofSeconds(10));
                        after.addAll(next.sweep(node.inventory.sample(), node.scheduler.allocations()));
                    }
                    node.scheduler.removeListener(next);
                }
            }
        }
        assertThat(ranOn).isNotNull().isAfterOrEqualTo(busyAt.plus(Duration.ofMinutes(5)));
        assertThat(flagged(after)).as("GPU 0 read busy at %s, the second sweep of the second restarted sampler, killed"
                + " 10 s later (before its next checkpoint): the next sampler must not count the 4 idle minutes before"
                + " that busy sweep; expected flagged no sooner than the sampler that ran on (%s). Its steps:%s",
                busyAt, ranOn, after).isNotNull().isAfterOrEqualTo(ranOn);
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
