package io.gpusched.accounting.adversarial.review30;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AllocationUsage;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * docs/ACCOUNTING.md, "Not sampled": time no sampler saw "is a gap interval: held time only, and energy where the
 * counter's delta bridges it on an exclusively held GPU" (ScriptedTraceReportTest checks it for a 1-minute gap). fix28
 * holds a restart's gap over 10 minutes back (UsageMeter.observe: {@code tr.covered = t} at the first sweep) and
 * writes it later with {@code pendingGap}, which builds held time only: the counter's delta over the gap is never
 * taken, and the track's counter is overwritten by the first sweep's reading. The clock here never moves back: the
 * sampler is stopped for 30 minutes (a package upgrade), alice's exclusively held GPU keeps drawing 300 W, the clock
 * is confirmed by 11 minutes of sweeps, and the 30 minutes' energy (540 kJ, read by the counter) is gone from her
 * record, which an 9-minute stop would have kept.
 */
@Tag("adversarial")
class HeldBackGapDropsTheCountersEnergyTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aRestartGapOverTenMinutesStillCarriesTheCountersDeltaOnAnExclusiveGpu() {
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofSeconds(30)))) {
            node.inventory.setTrace(0, new UsageTrace(Duration.ofSeconds(10), List.of(60.0), List.of(),
                    List.of(300.0)));
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            long atGrant = node.inventory.sample().forDevice(0).orElseThrow().energyMillijoules().getAsLong();
            node.run(Duration.ofSeconds(10), 30); // 5 min
            node.stopSampler(); // a planned stop
            node.clock.advance(Duration.ofMinutes(30)); // the clock is right all along
            node.startSampler();
            node.run(Duration.ofSeconds(10), 70); // 11 min 40 s: the held-back gap is written, in full
            node.scheduler.release(a.id()); // at the last sweep
            long atRelease = node.inventory.sample().forDevice(0).orElseThrow().energyMillijoules().getAsLong();

            AllocationUsage u = AllocationUsage.find(node.store, a.id()).orElseThrow();
            long drawn = atRelease - atGrant;
            assertThat(u.total().heldMillis()).as("held time: the gap was written (%s)", u.verdict())
                    .isGreaterThanOrEqualTo(Duration.ofMinutes(46).toMillis());
            assertThat(u.total().energyMillijoules()).as("energy recorded for alice, mJ; her exclusive GPU's counter"
                    + " moved %d mJ from her grant to her release, %d mJ of it over the 30 min no sampler ran (%s)",
                    drawn, 300L * Duration.ofMinutes(30).toMillis(), u.verdict())
                    .isGreaterThanOrEqualTo(drawn * 95 / 100);
        }
    }
}
