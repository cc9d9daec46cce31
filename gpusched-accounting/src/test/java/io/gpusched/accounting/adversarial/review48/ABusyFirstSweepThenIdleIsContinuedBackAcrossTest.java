package io.gpusched.accounting.adversarial.review48;

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
import java.util.Map;
import java.util.OptionalDouble;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * docs/ACCOUNTING.md: a restarted sampler's first sweep "closes the gap of its downtime and credits nothing, but a GPU
 * it reads busy is busy again, as at any sweep (a record of no time that says busy is written then ... and no stretch
 * is continued back across it: reviews 44, 45)"; a restarted sampler "takes the same steps at the same sweeps" as one
 * that ran on; status lists "the policy's last step of that idle stretch only". Sampler A: idle 4 min (window 5: not
 * flagged, so no BUSY_AGAIN will be audited), stopped. Sampler B, 20 s later: its first sweep reads GPU 0 busy (the
 * busy record of no time is written at that sweep, S), then B reads it idle for 3 minutes and checkpoints: its
 * intervals are idle since S, the busy sweep itself (the meter's idle start is the start of the first idle step). When
 * IdleStatus.stretches walks back from that idle start, it skips the busy check at its starting point
 * (beforeGaps checks busyAt only where {@code from != at}), so it crosses the restart's gap to A's interval: the store's
 * stretch is A's again, 4 minutes before the busy sweep included. Status says so while B runs, and a planned restart
 * of B (no time lost) resumes A's count plus B's intervals (7 min) and flags at once, where B, run on, flags 5 minutes
 * after S. (Review44's fix covers a busy first sweep followed by another restart; here the same sampler goes on.)
 */
class ABusyFirstSweepThenIdleIsContinuedBackAcrossTest {
    @TempDir
    Path dir;

    /** window 5 min, warn_after 10, act_after 20, grace 8; checkpoints every minute. */
    private static AccountingSettings settings() {
        return AccountingSettings.defaults().withCheckpoint(Duration.ofMinutes(1)).withIdle(new IdlePolicy(1,
                Duration.ofMinutes(5), Duration.ofMinutes(10), Duration.ofMinutes(20), IdlePolicy.Action.RELEASE,
                "TERM", Duration.ofMinutes(8), List.of(), false, List.of()));
    }

    private static GpuMetrics busy(GpuMetrics m) {
        return new GpuMetrics(m.index(), OptionalDouble.of(95), m.memoryUsed(), m.temperatureCelsius(),
                m.powerWatts(), m.sampledAt(), m.energyMillijoules());
    }

    /**
     * A idle 4 min, stopped; B 20 s later, its first sweep busy (at {@code busyAt[0]}), then idle 3 min.
     *
     * @return the node, B running
     */
    private static AccountingNode busyFirstSweepThenIdle(Path dir, Instant[] busyAt, List<IdleAction> all) {
        AccountingNode node = new AccountingNode(dir, settings());
        node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0)); // idle unless swept busy
        node.sweep();
        node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
        all.addAll(node.run(Duration.ofSeconds(10), 6 * 4)); // A: idle 4 min, not flagged
        node.stopSampler();
        node.clock.advance(Duration.ofSeconds(20));
        node.startSampler(); // B
        node.clock.advance(Duration.ofSeconds(10));
        busyAt[0] = node.clock.instant();
        all.addAll(node.sweepWith(0, ABusyFirstSweepThenIdleIsContinuedBackAcrossTest::busy)); // busy at S
        all.addAll(node.run(Duration.ofSeconds(10), 6 * 3)); // idle 3 min since S, checkpoints every minute
        return node;
    }

    /** @return when the allocation was first flagged (null: never, in 5 more minutes) */
    private static Instant firstFlagged(Path dir, boolean restart, Instant[] busyAt, List<IdleAction> all) {
        try (AccountingNode node = busyFirstSweepThenIdle(dir, busyAt, all)) {
            if (restart) {
                node.restartSampler(); // a planned stop and start of B, no time lost
            }
            for (int i = 0; i < 6 * 5; i++) {
                all.addAll(node.run(Duration.ofSeconds(10), 1));
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
    void aRestartAfterTheBusyFirstSweepFlagsNoSoonerThanTheSamplerThatRanOn() {
        Instant[] busyAt = new Instant[1];
        List<IdleAction> ranOnSteps = new ArrayList<>();
        Instant ranOn = firstFlagged(dir.resolve("ran-on"), false, busyAt, ranOnSteps);
        assertThat(ranOn).as("the sampler that ran on flags: %s", ranOnSteps).isNotNull();
        List<IdleAction> restartedSteps = new ArrayList<>();
        Instant restarted = firstFlagged(dir.resolve("restarted"), true, busyAt, restartedSteps);
        // the restarted sampler's first sweep closes the 10 s it was down and counts nothing (the restart checker
        // gives the sampler that ran on that sweep with no step): flagged at the same sweep, or that sweep's 10 s later
        assertThat(restarted).as("A idle 4 min (not flagged), stopped; B's first sweep read GPU 0 busy at %s, then"
                + " idle 3 min; B stopped and started again (no time lost): expected flagged no sooner than the"
                + " sampler that ran on (%s, 5 min after the busy sweep), for the busy reading ends the stretch; the"
                + " restarted one continued A's stretch across it and flagged at %s; its steps: %s", busyAt[0],
                ranOn, restarted, restartedSteps)
                .isNotNull().isBetween(ranOn, ranOn.plusSeconds(10));
    }

    @Test
    void statusListsTheAllocationIdleSinceTheBusySweepNotBeforeIt() {
        Instant[] busyAt = new Instant[1];
        try (AccountingNode node = busyFirstSweepThenIdle(dir.resolve("status"), busyAt, new ArrayList<>())) {
            Allocation a = node.scheduler.allocations().get(0);
            Map<String, IdleStatus> status = IdleStatus.read(node.store, node.clock.instant());
            assertThat(status).as("B has checkpointed 3 min of idle readings after its busy first sweep")
                    .containsKey(a.id());
            IdleStatus st = status.get(a.id());
            assertThat(st.idleSince()).as("status (%s): B's first sweep read GPU 0 busy at %s, and B's sweeps read it"
                    + " idle since; expected idle since no earlier than that busy sweep (idle %s), not since before"
                    + " it (A's stretch, 4 min before the restart)", st.describe(), busyAt[0], st.idleFor())
                    .isAfterOrEqualTo(busyAt[0]);
        }
    }
}
