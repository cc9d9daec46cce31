package io.gpusched.accounting.adversarial.review30;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.UsageReport;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDate;
import java.time.ZoneOffset;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * UsageReport: "a whole day inside the period is read from its summary where it has one. So figures of consecutive
 * periods add up to the figures of their union". The summary's rows are sums of a day's records (AccountingStore
 * .summarize), and RecordCodec refuses a summary row's energy when it is over 10 kW x (em + 60 s) (RecordCodec
 * .summary, plausibleEnergy): one 60-s allowance for a row that adds up records that were each granted one. Two short
 * allocations of alice's, each with one counter read 650 kJ ahead (each under its sweep's 700 kJ allowance, each
 * record plausible and read with its energy), make her compacted day's owner row "forged": the day's report by owner
 * says her energy is nothing, the report by allocation of the same day (read from the journal) says 1.3 MJ, and a
 * report by owner starting 1 ms later (read from the journal) says 1.3 MJ too.
 */
@Tag("adversarial")
class DaySummaryRefusesEnergyOfPlausibleRecordsTest {
    @TempDir
    Path dir;

    private static final long GLITCH_MJ = 650_000_000L; // 650 kJ

    private static void shortAllocationWithOneGlitch(AccountingNode node) {
        Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
        node.clock.advance(Duration.ofSeconds(10));
        node.sweepWith(0, m -> m.withEnergyMillijoules(m.energyMillijoules().getAsLong() + GLITCH_MJ));
        node.scheduler.release(a.id()); // at the sweep
        node.run(Duration.ofSeconds(10), 2); // the counter reads right again
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aCompactedDaysReportByOwnerKeepsTheEnergyOfItsRecords() {
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofSeconds(10)))) {
            node.inventory.setTrace(0, new UsageTrace(Duration.ofSeconds(10), List.of(60.0), List.of(),
                    List.of(300.0)));
            node.sweep();
            LocalDate day = LocalDate.ofInstant(node.clock.instant(), ZoneOffset.UTC);
            shortAllocationWithOneGlitch(node);
            shortAllocationWithOneGlitch(node);

            node.clock.advance(Duration.ofDays(3)); // a jump: skipped
            node.sweep();
            node.clock.advance(Duration.ofSeconds(10)); // the clock stays: housekeeping compacts the day
            node.sweep();
            assertThat(node.store.hasSummary(day)).as("%s compacted", day).isTrue();

            Instant start = day.atStartOfDay().toInstant(ZoneOffset.UTC);
            Instant end = start.plus(Duration.ofDays(1));
            UsageReport byAllocation = UsageReport.of(node.store, start, end, UsageReport.GroupBy.ALLOCATION);
            UsageReport byOwner = UsageReport.of(node.store, start, end, UsageReport.GroupBy.OWNER);
            UsageReport byOwnerFrom1ms = UsageReport.of(node.store, start.plusMillis(1), end,
                    UsageReport.GroupBy.OWNER);
            assertThat(byAllocation.total().energyMillijoules()).as("energy of %s by allocation (journal)", day)
                    .isGreaterThan(2 * GLITCH_MJ);
            assertThat(byOwner.total().energyMillijoules()).as("energy of %s by owner (its summary), mJ; by"
                    + " allocation: %d mJ; by owner from 1 ms after midnight: %d mJ; warnings %s", day,
                    byAllocation.total().energyMillijoules(), byOwnerFrom1ms.total().energyMillijoules(),
                    byOwner.warnings()).isEqualTo(byAllocation.total().energyMillijoules());
        }
    }
}
