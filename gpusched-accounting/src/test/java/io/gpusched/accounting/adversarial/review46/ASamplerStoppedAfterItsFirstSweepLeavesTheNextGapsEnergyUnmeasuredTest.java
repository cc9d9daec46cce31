package io.gpusched.accounting.adversarial.review46;

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
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * docs/ACCOUNTING.md: time no sampler saw is a gap, "held time only, and energy where the counter's delta bridges it on
 * an exclusively held GPU"; a restarted sampler's first sweep that reads a GPU busy writes "a record of no time that
 * says busy ..., naming that sweep's energy counters" (review45: so that "a next sampler bridges from these counters").
 * review45's test placed that sweep on a UTC midnight, where the busy record is the allocation's tail. At any other
 * time of day the store's tail at that sweep's time is the gap record the same sweep wrote, which names no counter
 * (it is read first at the tie), so the next sampler cannot bridge its own gap: the energy of its downtime is "not
 * measured" though both counters are known and the GPU is held exclusively. The same with a first sweep that reads the
 * GPU idle (its only record at that time is the gap's). Sampler A sweeps an exclusively held GPU drawing 45 W from
 * 11:50 to 11:58; B starts at noon, sweeps once and stops; C starts at 12:01 and runs to 12:02. The sampler that ran
 * on reports 32.4 kJ over the 12 minutes held, all of it measured; the restarted ones 29.7 kJ, the minute 12:00-12:01
 * without energy.
 */
class ASamplerStoppedAfterItsFirstSweepLeavesTheNextGapsEnergyUnmeasuredTest {
    @TempDir
    Path dir;

    private static final Instant NOON = Instant.parse("2026-03-03T12:00:00Z");

    private static AccountingSettings settings() {
        return AccountingSettings.defaults().withCheckpoint(Duration.ofMinutes(1)).withIdle(new IdlePolicy(1,
                Duration.ofMinutes(30), Duration.ofMinutes(60), Duration.ofMinutes(90), IdlePolicy.Action.RELEASE,
                "TERM", Duration.ofMinutes(8), List.of(), false, List.of()));
    }

    private static GpuMetrics busy(GpuMetrics m) {
        return new GpuMetrics(m.index(), OptionalDouble.of(95), m.memoryUsed(), m.temperatureCelsius(),
                m.powerWatts(), m.sampledAt(), m.energyMillijoules());
    }

    /** @return the allocation's usage; with {@code restarts}, stopped at 11:58, B at noon (one sweep), C at 12:01 */
    private static AllocationUsage play(Path dir, boolean restarts, UnaryOperator<GpuMetrics> firstSweep) {
        try (AccountingNode node = new AccountingNode(dir, settings())) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0)); // 45 W throughout
            node.clock.set(NOON.minus(Duration.ofMinutes(10)));
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            node.run(Duration.ofSeconds(10), 6 * 8); // to 11:58
            if (restarts) {
                node.stopSampler();
            }
            node.clock.set(NOON);
            if (restarts) {
                node.startSampler(); // B: one sweep, at noon
            }
            node.sweepWith(0, firstSweep);
            if (restarts) {
                node.stopSampler();
            }
            node.clock.set(NOON.plus(Duration.ofMinutes(1)));
            if (restarts) {
                node.startSampler(); // C
            }
            node.sweep();
            node.run(Duration.ofSeconds(10), 6); // to 12:02
            node.stopSampler();
            node.startSampler(); // the node's close() closes a sampler
            return AllocationUsage.find(node.store, a.id()).orElseThrow();
        }
    }

    private void check(String first, UnaryOperator<GpuMetrics> firstSweep) {
        AllocationUsage ranOn = play(dir.resolve("ran-on-" + first), false, firstSweep);
        AllocationUsage restarted = play(dir.resolve("restarted-" + first), true, firstSweep);
        assertThat(ranOn.total().energyMillijoules()).isEqualTo(32_400_000L);
        assertThat(restarted.total().heldMillis()).isEqualTo(Duration.ofMinutes(12).toMillis());
        assertThat(restarted.total().energyMillijoules()).as("an exclusively held GPU drawing 45 W for 12 minutes,"
                + " samplers down 11:58-12:00 and 12:00-12:01 (B's one sweep at noon read it %s), the counters known"
                + " at each sweep: expected the energy the sampler that ran on reports (%s mJ), each gap bridged by the"
                + " counter; the minute after B's sweep went without energy (measured %s ms of %s); records: %s",
                first, ranOn.total().energyMillijoules(), restarted.total().energyMillis(),
                restarted.total().heldMillis(), restarted).isEqualTo(ranOn.total().energyMillijoules());
    }

    @Test
    void aBusyFirstSweepsCountersBridgeTheNextGap() {
        check("busy", ASamplerStoppedAfterItsFirstSweepLeavesTheNextGapsEnergyUnmeasuredTest::busy);
    }

    @Test
    void anIdleFirstSweepsCountersBridgeTheNextGap() {
        check("idle", m -> m);
    }
}
