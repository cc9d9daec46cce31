package io.gpusched.accounting.adversarial.review46;

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
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalDouble;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * review45's fix (UsageMeter.continuesIdle): a restarted sampler's first sweep that cannot read utilization keeps a
 * resumed stretch idle "from that sweep". The sampler resumes every stretch the store has, whatever its downtime; the
 * policy decides later (at the first idle reading) whether the gap, longer than 10 minutes, starts it over. So after
 * a restart 11 minutes after the stretch's last checkpoint, the meter calls the allocation idle from its first sweep
 * through a spell of sweeps that read no utilization, and every checkpoint of that spell is written idle since that
 * first sweep: unreadable time, which no sweep measured idle and the running policy never counts (it starts its new
 * stretch at the first idle reading with one step counted). A kill soon after the first idle reading (before the next
 * checkpoint, so no count of the new stretch is in the store) leaves the next sampler a stretch that begins at the
 * restart, with no count of it: it counts the unreadable checkpoint intervals by the bound (5 minutes) and flags at
 * once, about 5 minutes before the sampler that ran on. The docs: a killed one "never flags, warns or acts sooner
 * than the sampler that ran on".
 */
class AKillAfterALongRestartWithUnreadableSweepsFlagsEarlyTest {
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

    /** @return when the allocation was first flagged (null: never, in 15 minutes of idle sweeps) */
    private static Instant firstFlagged(Path dir, boolean kill, List<IdleAction> all) {
        AccountingSettings settings = settings();
        try (AccountingNode node = new AccountingNode(dir, settings)) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0)); // idle throughout
            node.sweep();
            node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            all.addAll(node.run(Duration.ofSeconds(10), 6 * 4)); // A: idle 4 min, not flagged
            node.stopSampler();
            node.clock.advance(Duration.ofMinutes(11)); // down 11 minutes: the stretch starts over
            node.startSampler(); // B
            // B's first 35 sweeps (5 min 40 s) read no utilization: neither idle nor busy
            all.addAll(node.sweepWith(0, AKillAfterALongRestartWithUnreadableSweepsFlagsEarlyTest::unreadable));
            for (int i = 0; i < 34; i++) {
                node.clock.advance(Duration.ofSeconds(10));
                all.addAll(node.sweepWith(0, AKillAfterALongRestartWithUnreadableSweepsFlagsEarlyTest::unreadable));
            }
            all.addAll(node.run(Duration.ofSeconds(10), 1)); // the first idle reading (no checkpoint at it)
            if (kill) { // kill -9 now; the next sampler starts on the store as B's last write left it, 10 s later
                AccountingStore copy = node.killedCopy(dir.resolve("killed"));
                node.scheduler.removeListener(node.sampler);
                node.sampler = AccountingSampler.open(copy, settings, node.inventory, node.attribution,
                        new HostIdleEffects(node.scheduler), node.clock).orElseThrow();
                node.scheduler.addListener(node.sampler);
                node.sampler.knownLive(node.scheduler.allocations());
            }
            for (int i = 0; i < 6 * 15; i++) {
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
    void theKilledSamplerFlagsNoSoonerThanTheOneThatRanOn() {
        List<IdleAction> ranOnSteps = new ArrayList<>();
        Instant ranOn = firstFlagged(dir.resolve("ran-on"), false, ranOnSteps);
        assertThat(ranOn).as("the sampler that ran on flags: %s", ranOnSteps).isNotNull();
        List<IdleAction> killedSteps = new ArrayList<>();
        Instant killed = firstFlagged(dir.resolve("killed"), true, killedSteps);
        assertThat(killed).as("restarted 11 min after the stretch's last checkpoint (it starts over), the restarted"
                + " sampler's first 35 sweeps unreadable (no utilization: neither idle nor busy), then idle; killed"
                + " after its first idle reading and continued 10 s later: expected flagged no sooner than the sampler"
                + " that ran on (%s, 5 min of idle readings after the unreadable spell), for the unreadable time is"
                + " not idle time; steps of the killed run: %s", ranOn, killedSteps)
                .isNotNull().isAfterOrEqualTo(ranOn);
    }
}
