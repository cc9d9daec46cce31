package io.gpusched.accounting.adversarial.review28;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AllocationUsage;
import io.gpusched.accounting.UsageReport;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationEvent;
import io.gpusched.core.AllocationListener;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The race UsageMeter's {@code ended} set was made for (b4813444), one step on: the console's sweep thread reads the
 * live allocations, alice's allocation is released on another thread, the sweep (taken after the release) credits
 * her GPU up to its own time, and only then does the release's event reach the sampler (it waits for the sampler's
 * monitor, which the sweep holds). UsageMeter.end then cuts the open interval back to the release
 * ({@code r < tr.covered}): every figure is scaled by keep/len and rounded (UsageFigures.scale), utilizationMillis
 * to a whole ms, utilizationPercentMillis not. When a part of the interval had no utilization reading (um < held) and
 * the GPU was busy near 100 %, {@code us} ends up above {@code 100 x um}: RecordCodec refuses the whole release record
 * when it is read ("us: expected a number from 0 to ..."). Alice's allocation then has no record at all here (nothing
 * was checkpointed since her grant): the report skips it with a warning, and the GPU-seconds and the release are lost.
 */
@Tag("adversarial")
class ReleaseHeardAfterALaterSweepTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aReleaseRecordCutBackToTheReleaseIsReadable() {
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofMinutes(5)))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 100));
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            Instant granted = node.clock.instant();
            node.run(Duration.ofSeconds(10), 1);
            node.clock.advance(Duration.ofSeconds(10)); // one sweep that read no utilization for GPU 0
            node.sweepWith(0, m -> new GpuMetrics(m.index(), OptionalDouble.empty(), m.memoryUsed(),
                    m.temperatureCelsius(), m.powerWatts(), m.sampledAt(), m.energyMillijoules()));

            // the sweep thread reads the live allocations ...
            List<Allocation> live = node.scheduler.allocations();
            // ... another thread releases alice's allocation; its event reaches the sampler only after the sweep
            List<AllocationEvent> held = new CopyOnWriteArrayList<>();
            AllocationListener later = held::add;
            node.scheduler.removeListener(node.sampler);
            node.scheduler.addListener(later);
            node.clock.set(granted.plusMillis(25_001));
            node.scheduler.release(a.id());
            Instant released = node.clock.instant();
            node.scheduler.removeListener(later);
            node.scheduler.addListener(node.sampler);
            // ... the sweep is taken and credited with the list it read
            node.clock.set(granted.plusSeconds(30));
            node.sampler.sweep(node.inventory.sample(), live);
            // ... and the release's event is delivered
            assertThat(held).as("events of the release").isNotEmpty();
            node.sampler.onEvents(held);

            UsageReport r = UsageReport.of(node.store, AccountingNode.T0, released.plusSeconds(60),
                    UsageReport.GroupBy.ALLOCATION);
            Optional<AllocationUsage> found = AllocationUsage.find(node.store, a.id());
            assertThat(found).as("alice's allocation in the store (granted %s, released %s); the report's warnings:"
                    + " %s", granted, released, r.warnings()).isPresent();
            AllocationUsage u = found.get();
            assertThat(u.end()).as("how alice's allocation ended; the report's warnings: %s", r.warnings())
                    .isEqualTo(Optional.of("RELEASED"));
            assertThat(u.total().heldMillis()).as("GPU-ms of alice's allocation (granted %s, released %s)", granted,
                    released).isEqualTo(Duration.between(granted, released).toMillis());
        }
    }
}
