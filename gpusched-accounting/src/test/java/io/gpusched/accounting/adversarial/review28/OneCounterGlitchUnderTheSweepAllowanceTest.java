package io.gpusched.accounting.adversarial.review28;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AllocationUsage;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * review23's EnergyCounterGlitchTest, reopened by 1d746fe3 for any glitch below 6 MJ. UsageMeter.plausible accepts a
 * counter delta up to 10 kW x (the sweep's span + MAX_SWEEP_MILLIS): over a 10 s sweep that is 6,100 kJ, i.e. a
 * single garbage read that jumps the counter 3 MJ ahead (and comes back at the next sweep: that sweep goes back to
 * power x time) is kept as the GPU's exact, measured energy. A GPU at 60 % (about 200 W) for 10 minutes drew about
 * 0.12 MJ; alice is charged 3.1 MJ, "exact", 25 times what her GPU drew, and the record passes RecordCodec's check
 * (10 kW x em over the 10-min record) too. The allowance meant for a clock step back (the span by the clock shorter
 * than the time that passed) is granted to every sweep, whatever time really passed.
 */
@Tag("adversarial")
class OneCounterGlitchUnderTheSweepAllowanceTest {
    @TempDir
    Path dir;

    private static final long GLITCH_MJ = 3_000_000_000L; // 3 MJ, in mJ

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void oneGarbageCounterReadOf3MegajoulesIsNotChargedAsMeasuredEnergy() {
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofHours(1)))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 60));
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            long atGrant = node.inventory.sample().forDevice(0).orElseThrow().energyMillijoules().getAsLong();
            node.run(Duration.ofSeconds(10), 30);
            node.clock.advance(Duration.ofSeconds(10));
            node.sweepWith(0, m -> m.withEnergyMillijoules(m.energyMillijoules().getAsLong() + GLITCH_MJ));
            node.run(Duration.ofSeconds(10), 29);
            node.scheduler.release(a.id()); // at the last sweep
            long atRelease = node.inventory.sample().forDevice(0).orElseThrow().energyMillijoules().getAsLong();

            AllocationUsage u = AllocationUsage.find(node.store, a.id()).orElseThrow();
            long drawn = atRelease - atGrant;
            // at most what the meter's own bound (10 kW) allows over the one 10 s sweep that read the glitch
            long allowance = 10_000L * 10_000L;
            assertThat(u.total().energyMillijoules()).as("energy charged to alice, mJ: her GPU's counter moved %d mJ"
                    + " from grant to release; one read in between was %d mJ ahead; %d mJ of the total recorded as"
                    + " estimated (%s)", drawn, GLITCH_MJ, u.total().estimatedMillijoules(), u.verdict())
                    .isLessThanOrEqualTo(drawn + allowance);
        }
    }
}
