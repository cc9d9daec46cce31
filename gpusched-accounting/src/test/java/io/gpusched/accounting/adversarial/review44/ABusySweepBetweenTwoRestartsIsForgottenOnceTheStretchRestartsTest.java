package io.gpusched.accounting.adversarial.review44;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.IdlePolicy;
import io.gpusched.accounting.IdleStatus;
import io.gpusched.accounting.IdleStep;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalDouble;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * review43's fix (7a9ca06f) keeps the next sampler from continuing a stretch across a trailing gap when the sampler
 * that closed the gap read the allocation busy at its first sweep (no count of the stretch at or after the gap's
 * end). It only holds while the gap is the store's last record. Sampler A: idle 4 min (not flagged), stopped;
 * sampler B, 20 s later: its first sweep reads GPU 0 busy (nothing in the store says so: no interval credited, no
 * BUSY_AGAIN as it was not flagged, no count), stopped at once; sampler C, 20 s later: drops the stretch (right), reads
 * GPU 0 idle and starts a new stretch from its first sweep (its counts say so: start = that sweep), and checkpoints.
 * Now the store's last record is C's interval idle since C's first sweep, and IdleStatus.stretches walks back from it
 * across both gap records (40 s in all, under 10 min) to A's interval, idle since A's start: the stretch is A's again,
 * with A's 4 idle minutes before the busy sweep. C's counts (start = C's first sweep) no longer match that start, so
 * the next sampler D re-derives the count from A's start and flags about 2 minutes sooner than the sampler that ran
 * on; {@code gpusched status} says idle since A's start while C runs.
 */
class ABusySweepBetweenTwoRestartsIsForgottenOnceTheStretchRestartsTest {
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

    /** The same sweeps at the same times; with {@code restarts}, the sampler is stopped and started where marked. */
    private static List<IdleAction> play(Path dir, boolean restarts, Instant[] busyAt, IdleStatus[] statusWhileC) {
        try (AccountingNode node = new AccountingNode(dir, settings())) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0));
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            assertThat(node.run(Duration.ofSeconds(10), 6 * 4)).isEmpty(); // A: idle 4 min, not flagged yet
            if (restarts) {
                node.stopSampler();
            }
            node.clock.advance(Duration.ofSeconds(20));
            if (restarts) {
                node.startSampler(); // B
            }
            busyAt[0] = node.clock.instant();
            assertThat(node.sweepWith(0, ABusySweepBetweenTwoRestartsIsForgottenOnceTheStretchRestartsTest::busy))
                    .isEmpty();
            if (restarts) {
                node.stopSampler();
            }
            node.clock.advance(Duration.ofSeconds(20));
            if (restarts) {
                node.startSampler(); // C
            }
            List<IdleAction> steps = new ArrayList<>(node.sweep());
            steps.addAll(node.run(Duration.ofSeconds(10), 12)); // 2 min idle since the busy sweep: checkpoints
            assertThat(steps).isEmpty();
            statusWhileC[0] = IdleStatus.read(node.store, node.clock.instant()).get(a.id());
            if (restarts) {
                node.stopSampler();
            }
            node.clock.advance(Duration.ofSeconds(20));
            if (restarts) {
                node.startSampler(); // D
            }
            steps.addAll(node.sweep());
            for (int i = 0; i < 60 && flagged(steps) == null; i++) {
                steps.addAll(node.run(Duration.ofSeconds(10), 1));
            }
            return steps;
        }
    }

    @Test
    void theSamplerAfterTheNextOneFlagsNoSoonerThanTheOneThatRanOn() {
        Instant[] busyAt = new Instant[1];
        IdleStatus[] status = new IdleStatus[1];
        Instant ranOn = flagged(play(dir.resolve("ran-on"), false, busyAt, status));
        assertThat(ranOn).isNotNull().isAfterOrEqualTo(busyAt[0].plus(Duration.ofMinutes(5)));
        List<IdleAction> restarted = play(dir.resolve("restarted"), true, busyAt, status);
        assertThat(flagged(restarted)).as("GPU 0 read busy at %s (the first sweep of a sampler stopped right after"
                + " it); the sampler after the next one must not count the 4 idle minutes before that busy sweep:"
                + " expected flagged no sooner than the sampler that ran on (%s). Its steps:%s", busyAt[0], ranOn,
                restarted).isNotNull().isAfterOrEqualTo(ranOn);
    }

    @Test
    void statusWhileTheNextSamplerRunsSaysIdleSinceTheBusySweep() {
        Instant[] busyAt = new Instant[1];
        IdleStatus[] ranOn = new IdleStatus[1];
        play(dir.resolve("ran-on"), false, busyAt, ranOn);
        assertThat(ranOn[0]).isNotNull();
        assertThat(ranOn[0].idleSince()).isAfterOrEqualTo(busyAt[0]);
        IdleStatus[] restarted = new IdleStatus[1];
        play(dir.resolve("restarted"), true, busyAt, restarted);
        assertThat(restarted[0]).isNotNull();
        assertThat(restarted[0].idleSince()).as("GPU 0 read busy at %s; status while the next sampler runs (its"
                + " policy counts from after that sweep) must say idle since that sweep or later, as for the sampler"
                + " that ran on (%s); it said %s", busyAt[0], ranOn[0], restarted[0]).isAfterOrEqualTo(busyAt[0]);
    }
}
