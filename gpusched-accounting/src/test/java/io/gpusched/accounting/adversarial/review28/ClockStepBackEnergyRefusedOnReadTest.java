package io.gpusched.accounting.adversarial.review28;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AllocationUsage;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuSample;
import io.gpusched.core.MemorySize;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * 1d746fe3 made the meter and the reader disagree. UsageMeter.plausible now takes a counter's delta as exact when it is
 * no more than 10 kW x (the span by the clock + MAX_SWEEP_MILLIS, 10 min), so that a sweep the wall clock stepped back
 * into keeps the counter's delta (review25's CounterAcrossClockStepBackTest). RecordCodec still refuses, when it reads
 * the record back, a device's energy above 10 kW x its {@code em} (the span by the clock alone) and drops it with
 * ENERGY_REFUSED. So the delta the meter kept "exact" is thrown away again as soon as the record that carries it is
 * short: here the release comes at the sweep right after the step back, and the release record is that one sweep
 * (10 ms by the clock, 3 kJ by the counter). The sampler wrote the energy as measured; every report reads it as not
 * measured, and the 3 kJ vanish from alice's total (the same scenario as review25's test, released one sweep earlier,
 * with a checkpoint at every sweep).
 */
@Tag("adversarial")
class ClockStepBackEnergyRefusedOnReadTest {
    @TempDir
    Path dir;

    private static final long WATTS = 300;
    private static final long STEP_MS = 10_000;

    private static GpuSample sample(Instant wall, long counterMillijoules) {
        GpuMetrics m = GpuMetrics.of(0, 60, MemorySize.ofGibibytes(8), 50, WATTS, wall)
                .withEnergyMillijoules(counterMillijoules);
        return new GpuSample(wall, List.of(m));
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void theCountersDeltaOverTheSweepTheClockSteppedBackIntoSurvivesTheReleaseRecord() {
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofSeconds(1)))) {
            long counter = 1_000_000_000L; // mJ since the driver loaded
            Instant wall = AccountingNode.T0;
            node.clock.set(wall);
            node.sampler.sweep(sample(wall, counter), node.scheduler.allocations());
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            long first = counter;
            for (int k = 1; k <= 7; k++) {
                counter += WATTS * STEP_MS; // 10 s of real time at 300 W: W x ms = mJ
                // sweep 7: the clock was stepped back 9.99 s since sweep 6, so it reads 10 ms after it
                wall = wall.plusMillis(k == 7 ? 10 : STEP_MS);
                node.clock.set(wall);
                node.sampler.sweep(sample(wall, counter), node.scheduler.allocations());
            }
            node.scheduler.release(a.id()); // at sweep 7: its record is [sweep 6, sweep 7), 10 ms by the clock

            AllocationUsage u = AllocationUsage.find(node.store, a.id()).orElseThrow();
            long measured = counter - first; // what the driver's counter says the GPU drew while alice held it
            assertThat(u.total().energyMillijoules()).as("energy recorded for alice, mJ (the counter moved %d mJ"
                    + " between her grant's sweep and her release's, every delta taken as exact by the meter; notes"
                    + " %s; %s)", measured, u.devices().get(0).notes(), u.verdict()).isEqualTo(measured);
        }
    }
}
