package io.gpusched.accounting.adversarial.review25;

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
 * A legitimately fast counter refused (b4813444: UsageMeter.plausible judges a counter's delta against the wall
 * clock's span between two sweeps). The sweeps come every 10 s of real time; NTP steps the wall clock back 9.99 s
 * between two of them (it had run fast), so that sweep reads the clock only 10 ms after the previous one. The GPU's
 * energy counter (NVML's, which counts in the driver, not by the wall clock) moved 3 kJ: the 10 s at 300 W that
 * really passed. 3 kJ over 10 ms "is" 300 kW, so the meter throws the counter's delta away as a glitch and estimates
 * 300 W x 10 ms = 3 J instead: 2,997 J the counter measured vanish from the record, which now says "estimated" though
 * the counter was read at every sweep and never reset. Before b4813444 the delta was kept, exact. docs/ACCOUNTING.md:
 * energy is "the driver's counter's delta where the device has one (exact)".
 */
@Tag("adversarial")
class CounterAcrossClockStepBackTest {
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
    void theCountersDeltaOverASweepTheClockSteppedBackIntoIsKeptExact() {
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofMinutes(5)))) {
            long counter = 1_000_000_000L; // mJ since the driver loaded
            Instant wall = AccountingNode.T0;
            node.clock.set(wall);
            node.sampler.sweep(sample(wall, counter), node.scheduler.allocations());
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            long first = counter;
            for (int k = 1; k <= 12; k++) {
                counter += WATTS * STEP_MS; // 10 s of real time at 300 W: W x ms = mJ
                // sweep 7: the clock was stepped back 9.99 s since sweep 6, so it reads 10 ms after it
                wall = wall.plusMillis(k == 7 ? 10 : STEP_MS);
                node.clock.set(wall);
                node.sampler.sweep(sample(wall, counter), node.scheduler.allocations());
            }
            node.scheduler.release(a.id()); // at the last sweep: nothing after it unsampled

            AllocationUsage u = AllocationUsage.find(node.store, a.id()).orElseThrow();
            long measured = counter - first; // what the driver's counter says the GPU drew while alice held it
            assertThat(u.total().energyMillijoules()).as("energy recorded for alice, mJ (the counter moved %d mJ"
                    + " between her grant's sweep and her release's; %d mJ recorded as estimated; %s)", measured,
                    u.total().estimatedMillijoules(), u.verdict()).isEqualTo(measured);
        }
    }
}
