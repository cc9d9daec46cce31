package io.gpusched.accounting.adversarial.review25;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AllocationUsage;
import io.gpusched.accounting.UsageReport;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The sampler writes records its own reader refuses. Since b4813444, RecordCodec refuses an interval whose energy is
 * above 10 kW x em as malformed, and UsageMeter guards the energy counter's path against it (a counter that moved
 * faster is estimated from power instead); the power path itself has no such guard: energy estimated from power is
 * {@code powerWatts x (t - prev)} whatever the reading. NvmlPoller takes nvmlDeviceGetPowerUsage as an unsigned 32-bit
 * mW value and passes it on unchecked, so one all-ones read (0xFFFFFFFF mW, 4,294,967 W: a glitching read, a hostile
 * backend) on a GPU without an energy counter (pre-Volta, many vGPUs) gives an interval the codec then refuses: the report
 * skips the whole line with a warning, so the allocation loses that interval's GPU-seconds and, when it is the last,
 * its release (it reads as still running). Likewise a utilization read above 100 % on an exclusively held GPU: the
 * shared path caps at 100, the exclusive one copies the device's value, and the codec refuses {@code up > 100}.
 */
@Tag("adversarial")
class SamplersOwnRecordRefusedTest {
    @TempDir
    Path dir;

    private static final double NVML_ALL_ONES_MILLIWATTS = 0xFFFFFFFFL / 1000.0;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void oneImplausiblePowerReadDoesNotMakeTheAllocationsReleaseRecordUnreadable() {
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofMinutes(5)))) {
            node.inventory.setTrace(2, UsageTrace.of(Duration.ofSeconds(10), 50)); // GPU 2: no energy counter
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(2).owner("alice").build());
            node.run(Duration.ofSeconds(10), 6);
            node.clock.advance(Duration.ofSeconds(10));
            node.sweepWith(2, m -> new GpuMetrics(m.index(), m.utilizationPercent(), m.memoryUsed(),
                    m.temperatureCelsius(), OptionalDouble.of(NVML_ALL_ONES_MILLIWATTS), m.sampledAt(),
                    m.energyMillijoules()));
            node.run(Duration.ofSeconds(10), 2);
            node.scheduler.release(a.id());
            Instant released = node.clock.instant();

            UsageReport r = UsageReport.of(node.store, AccountingNode.T0, released.plusSeconds(1),
                    UsageReport.GroupBy.ALLOCATION);
            Optional<AllocationUsage> found = AllocationUsage.find(node.store, a.id());
            assertThat(found).as("alice's allocation in the store (granted %s, released %s); the report's warnings:"
                    + " %s", a.createdAt(), released, r.warnings()).isPresent();
            AllocationUsage u = found.get();
            assertThat(u.end()).as("how alice's allocation ended, per the store (released at %s); the report's"
                    + " warnings: %s", released, r.warnings()).isEqualTo(Optional.of("RELEASED"));
            assertThat(u.total().heldMillis()).as("GPU-ms of alice's allocation (ledger: %s to %s)", a.createdAt(),
                    released).isEqualTo(Duration.between(a.createdAt(), released).toMillis());
        }
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void oneUtilizationReadAbove100PercentDoesNotMakeTheIntervalUnreadable() {
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofSeconds(30)))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 50));
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            node.run(Duration.ofSeconds(10), 3);
            node.clock.advance(Duration.ofSeconds(10));
            node.sweepWith(0, m -> new GpuMetrics(m.index(), OptionalDouble.of(101), m.memoryUsed(),
                    m.temperatureCelsius(), m.powerWatts(), m.sampledAt(), m.energyMillijoules()));
            node.run(Duration.ofSeconds(10), 4);
            node.sampler.checkpoint();
            Instant now = node.clock.instant();

            UsageReport r = UsageReport.of(node.store, AccountingNode.T0, now.plusSeconds(1),
                    UsageReport.GroupBy.ALLOCATION);
            AllocationUsage u = AllocationUsage.find(node.store, a.id()).orElseThrow();
            assertThat(u.total().heldMillis()).as("GPU-ms of alice's allocation, granted %s, swept to %s; the report's"
                    + " warnings: %s", a.createdAt(), now, r.warnings())
                    .isEqualTo(Duration.between(a.createdAt(), now).toMillis());
        }
    }
}
