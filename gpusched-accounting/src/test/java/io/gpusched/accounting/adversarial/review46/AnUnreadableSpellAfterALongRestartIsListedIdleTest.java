package io.gpusched.accounting.adversarial.review46;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.IdlePolicy;
import io.gpusched.accounting.IdleStatus;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.OptionalDouble;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * docs/ACCOUNTING.md: an allocation is idle while every GPU of it has a utilization figure at or below the threshold;
 * a stretch continues back across a gap of at most 10 minutes, and after a longer one an allocation is listed again
 * "idle from the sweep after the gap" once a sweep reads it idle. review45's fix keeps a resumed stretch idle from a
 * restarted sampler's first sweep when that sweep cannot read utilization, even when the restart came more than 10
 * minutes after the stretch's last checkpoint (the stretch does not continue; the policy starts over). Sampler A: idle
 * 4 min, stopped; B started 11 minutes later, every sweep of it for 5 minutes reads no utilization. No sweep since
 * the 11-minute gap read the allocation idle, yet status lists it idle since B's first sweep, for 5 minutes. The same
 * 11 minutes as a suspended host (one sampler, its clock jumped ahead) with the same unreadable sweeps: not listed.
 */
class AnUnreadableSpellAfterALongRestartIsListedIdleTest {
    @TempDir
    Path dir;

    private static AccountingSettings settings() {
        return AccountingSettings.defaults().withCheckpoint(Duration.ofMinutes(1)).withIdle(new IdlePolicy(1,
                Duration.ofMinutes(5), Duration.ofMinutes(10), Duration.ofMinutes(30), IdlePolicy.Action.RELEASE,
                "TERM", Duration.ofMinutes(8), List.of(), false, List.of()));
    }

    private static GpuMetrics unreadable(GpuMetrics m) {
        return new GpuMetrics(m.index(), OptionalDouble.empty(), m.memoryUsed(), m.temperatureCelsius(),
                m.powerWatts(), m.sampledAt(), m.energyMillijoules());
    }

    /** @return status after 5 min of unreadable sweeps following an 11-minute gap (a restart, or a suspension) */
    private static IdleStatus[] play(Path dir, boolean restart) {
        try (AccountingNode node = new AccountingNode(dir, settings())) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0));
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            node.run(Duration.ofSeconds(10), 6 * 4); // idle 4 min
            if (restart) {
                node.stopSampler();
            }
            node.clock.advance(Duration.ofMinutes(11));
            if (restart) {
                node.startSampler();
            } else { // a suspended host: the sweep after it is skipped as a jump, the next one closes the gap
                node.sweepWith(0, AnUnreadableSpellAfterALongRestartIsListedIdleTest::unreadable);
                node.clock.advance(Duration.ofSeconds(10));
            }
            node.sweepWith(0, AnUnreadableSpellAfterALongRestartIsListedIdleTest::unreadable);
            for (int i = 0; i < 6 * 5; i++) {
                node.clock.advance(Duration.ofSeconds(10));
                node.sweepWith(0, AnUnreadableSpellAfterALongRestartIsListedIdleTest::unreadable);
            }
            return new IdleStatus[]{IdleStatus.read(node.store, node.clock.instant()).get(a.id())};
        }
    }

    @Test
    void notListedIdleWhileNoSweepSinceTheGapReadItIdle() {
        IdleStatus suspended = play(dir.resolve("suspended"), false)[0];
        IdleStatus restarted = play(dir.resolve("restarted"), true)[0];
        Instant gapEnd = AccountingNode.T0.plus(Duration.ofSeconds(240 + 660));
        assertThat(restarted).as("restarted 11 min after 4 idle minutes (the stretch does not continue across a gap"
                + " that long), every sweep of the restarted sampler for 5 min read no utilization (neither idle nor"
                + " busy): expected status not to list the allocation idle (no sweep since the gap measured it idle;"
                + " a suspended host's sampler with the same sweeps says %s), but it says idle since %s (the gap ended"
                + " at %s)", suspended, restarted == null ? null : restarted.idleSince(), gapEnd).isNull();
    }
}
