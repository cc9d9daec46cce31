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
import java.time.LocalDate;
import java.time.ZoneOffset;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * fix28's "one energy allowance": a sweep's counter delta is exact up to 10 kW x (span + 60 s) (UsageMeter.plausible)
 * and an interval is written when its energy is under 10 kW x (em + 60 s) (UsageMeter.close, the reader's
 * RecordCodec.plausibleEnergy). The 60 s are granted once per interval; compaction (AccountingStore.compact and
 * merge, summarize) adds intervals up, and the sum of two intervals that each used their 60 s fails the reader's check
 * on the merged interval (and on the day's summary rows): the energy the journal held, read plausible record by
 * record, becomes "not measured" the day the store compacts it. A report of the same allocation then says something
 * else after compaction than before it. The sampler checkpoints every 10 s (sweeps every 10 s); two reads of alice's
 * counter each 650 kJ ahead (each under its sweep's 700 kJ allowance, and each in its own interval).
 */
@Tag("adversarial")
class CompactionRefusesEnergyTheJournalKeptTest {
    @TempDir
    Path dir;

    private static final long GLITCH_MJ = 650_000_000L; // 650 kJ

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void compactingADayKeepsTheEnergyItsRecordsWereReadWith() {
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofSeconds(10)))) {
            node.inventory.setTrace(0, new UsageTrace(Duration.ofSeconds(10), List.of(60.0), List.of(),
                    List.of(300.0)));
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            LocalDate day = LocalDate.ofInstant(node.clock.instant(), ZoneOffset.UTC);
            node.clock.advance(Duration.ofSeconds(10));
            node.sweepWith(0, m -> m.withEnergyMillijoules(m.energyMillijoules().getAsLong() + GLITCH_MJ));
            node.clock.advance(Duration.ofSeconds(10));
            node.sweepWith(0, m -> m.withEnergyMillijoules(m.energyMillijoules().getAsLong() + 2 * GLITCH_MJ));
            node.scheduler.release(a.id()); // at the last sweep

            AllocationUsage before = AllocationUsage.find(node.store, a.id()).orElseThrow();
            assertThat(before.total().energyMillijoules()).as("energy read before compaction (%s)", before.verdict())
                    .isGreaterThan(GLITCH_MJ);

            node.clock.advance(Duration.ofDays(3)); // a jump: skipped
            node.sweep();
            node.clock.advance(Duration.ofSeconds(10)); // the clock stays: housekeeping compacts the day
            node.sweep();
            assertThat(node.store.hasSummary(day)).as("%s compacted", day).isTrue();

            AllocationUsage after = AllocationUsage.find(node.store, a.id()).orElseThrow();
            assertThat(after.total().energyMillijoules()).as("alice's energy after %s was compacted, mJ; before: %d"
                    + " mJ (%s); after: %s; notes %s", day, before.total().energyMillijoules(), before.verdict(),
                    after.verdict(), after.devices().get(0).notes())
                    .isEqualTo(before.total().energyMillijoules());
        }
    }
}
