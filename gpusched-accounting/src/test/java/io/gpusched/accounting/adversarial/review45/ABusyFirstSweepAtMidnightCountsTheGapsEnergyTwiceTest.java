package io.gpusched.accounting.adversarial.review45;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AllocationUsage;
import io.gpusched.accounting.IdlePolicy;
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
 * review44's fix: a restarted sampler whose first sweep reads an allocation busy writes a record of no time that says
 * busy (UsageMeter.observe: {@code close(tr, t, Optional.empty(), false)}). That record names the energy counter "at
 * its end", but the track's counters are still the ones from before the gap (they are updated after it): the gap's
 * record just before it bridged the counter from that old value to this sweep's. Within one day the tail recovery
 * picks at a tie of {@code to} is the gap record (read first, no counter), so nothing shows. When the sweep falls on
 * a UTC midnight, the gap record lives in yesterday's file and the busy record in today's: AccountingStore.recover
 * reads today first and keeps the busy record as the allocation's tail, with the stale counter. The next sampler
 * bridges its own gap from that stale counter, so the energy over the first gap (sampler A's last sweep to midnight)
 * is counted again: the report says more energy than the GPU used while held ("nothing is counted twice in reports").
 */
class ABusyFirstSweepAtMidnightCountsTheGapsEnergyTwiceTest {
    @TempDir
    Path dir;

    private static final Instant MIDNIGHT = Instant.parse("2026-03-03T00:00:00Z");

    private static AccountingSettings settings() {
        return AccountingSettings.defaults().withCheckpoint(Duration.ofMinutes(1)).withIdle(new IdlePolicy(1,
                Duration.ofMinutes(30), Duration.ofMinutes(60), Duration.ofMinutes(90), IdlePolicy.Action.RELEASE,
                "TERM", Duration.ofMinutes(8), List.of(), false, List.of()));
    }

    private static GpuMetrics busy(GpuMetrics m) {
        return new GpuMetrics(m.index(), OptionalDouble.of(95), m.memoryUsed(), m.temperatureCelsius(),
                m.powerWatts(), m.sampledAt(), m.energyMillijoules());
    }

    /** @return the allocation's usage; with {@code restarts}, stopped at 23:58, B at midnight (busy), C at 00:01 */
    private static AllocationUsage play(Path dir, boolean restarts) {
        try (AccountingNode node = new AccountingNode(dir, settings())) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0)); // idle: 45 W throughout
            node.clock.set(MIDNIGHT.minus(Duration.ofMinutes(10)));
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            node.run(Duration.ofSeconds(10), 6 * 8); // to 23:58
            if (restarts) {
                node.stopSampler();
            }
            node.clock.set(MIDNIGHT);
            if (restarts) {
                node.startSampler(); // B: its first sweep, at midnight, reads GPU 0 busy
            }
            node.sweepWith(0, ABusyFirstSweepAtMidnightCountsTheGapsEnergyTwiceTest::busy);
            if (restarts) {
                node.stopSampler();
            }
            node.clock.set(MIDNIGHT.plus(Duration.ofMinutes(1)));
            if (restarts) {
                node.startSampler(); // C
            }
            node.sweep();
            node.run(Duration.ofSeconds(10), 6); // to 00:02
            node.stopSampler();
            node.startSampler(); // the node's close() closes a sampler
            return AllocationUsage.find(node.store, a.id()).orElseThrow();
        }
    }

    @Test
    void theEnergyOfTheGapBeforeMidnightIsCountedOnce() {
        AllocationUsage ranOn = play(dir.resolve("ran-on"), false);
        AllocationUsage restarted = play(dir.resolve("restarted"), true);
        long held = restarted.total().heldMillis();
        assertThat(held).isEqualTo(ranOn.total().heldMillis()).isEqualTo(Duration.ofMinutes(12).toMillis());
        // GPU 0 drew 45 W the whole 12 minutes (32,400 J); the counters bridge both gaps exactly
        assertThat(restarted.total().energyMillijoules()).as("GPU 0 drew %s W for the %s ms it was held (%s mJ; the"
                + " sampler that ran on reports %s mJ); a sampler stopped at 23:58, one started at midnight whose"
                + " first sweep read it busy and stopped at once, then one started at 00:01: expected the same"
                + " energy, the gap 23:58-00:00 counted once; records: %s", UsageTrace.IDLE_WATTS, held,
                (long) (UsageTrace.IDLE_WATTS * held), ranOn.total().energyMillijoules(), restarted)
                .isLessThanOrEqualTo(ranOn.total().energyMillijoules() + 1_000);
    }
}
