package io.gpusched.accounting.adversarial.review23;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AllocationUsage;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuSample;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * One sweep reads a garbage energy counter (a driver glitch, a counter read from another GPU after a reload renumbered
 * them, a hostile backend): 10^15 mJ ahead of the last read, back to the true value at the next sweep. The meter takes
 * any delta that is not negative as exact ("the driver's energy counter's delta"), and only a step back as a reset. A
 * GPU at 300 W for 3 minutes drew 54 kJ; the record says 10^12 J, "exact", not estimated.
 */
@Tag("adversarial")
class EnergyCounterGlitchTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void oneGarbageCounterReadIsNotChargedAsMeasuredEnergy() {
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofSeconds(30)))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 60));
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            node.run(Duration.ofMinutes(1), 1);
            node.clock.advance(Duration.ofMinutes(1));
            GpuSample s = node.inventory.sample();
            List<GpuMetrics> ms = new ArrayList<>();
            for (GpuMetrics m : s.metrics()) {
                ms.add(m.index() == 0 && m.energyMillijoules().isPresent()
                        ? m.withEnergyMillijoules(m.energyMillijoules().getAsLong() + 1_000_000_000_000_000L)
                        : m);
            }
            node.sampler.sweep(new GpuSample(s.takenAt(), ms), node.scheduler.allocations());
            node.run(Duration.ofMinutes(1), 1);
            node.scheduler.release(a.id());

            AllocationUsage u = AllocationUsage.find(node.store, a.id()).orElseThrow();
            long held = u.total().heldMillis();
            // 10 kW, far above any GPU's board power: W x ms = mJ
            assertThat(u.total().energyMillijoules()).as("energy charged to alice's 1 GPU over %d ms, mJ (%s)", held,
                    u.verdict()).isLessThanOrEqualTo(10_000L * held);
        }
    }
}
