package io.gpusched.accounting;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.DeviceUsage;
import io.gpusched.accounting.AccountingRecord.Interval;
import io.gpusched.accounting.UsageReport.GroupBy;
import java.nio.file.Path;
import java.time.Instant;
import java.time.LocalDate;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import org.assertj.core.api.SoftAssertions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review 55: "reports are the same before and after compaction" (docs/ACCOUNTING.md, the d row: "A report over a
 * compacted day reads its GPUs and notes from these, the same as from the day's intervals"). A report row keeps at most
 * 8 notes, and which 8 depends on the path: over intervals, {@code UsageReport.RowAcc.add} keeps the first 8 distinct
 * notes in the order the records are read; over a compacted day, {@code AccountingStore.summarize} (and
 * {@code merge}) keep the 8 smallest in text order. A GPU whose records carry 9 distinct notes in a day (a shared GPU
 * whose backend lists no processes, not sampled for a while, energy estimated and then not measured, ...) shows one
 * set of notes before compaction and another after it, for the same day and the same figures: a reason that was shown
 * ("utilization not measured: a shared GPU whose backend cannot list its processes") vanishes and another appears.
 */
class Review55CompactionPicksOtherNotesTest {
    private static final LocalDate DAY = LocalDate.parse("2026-05-02");
    private static final String MIG_UTIL = "utilization not measured: NVML has no utilization per MIG device";
    private static final String NO_METRICS = "not measured: the sweep read no metrics for this GPU";

    private Instant since;
    private Instant until;

    /** @return the store with the day's two records, not yet compacted */
    private AccountingStore.Writer fixture(AccountingStore store) {
        Instant t0 = DAY.atStartOfDay().toInstant(ZoneOffset.UTC).plusSeconds(3_600);
        // one allocation of alice on GPU 5, two checkpoint intervals, each device's notes sorted as the meter writes
        // them (UsageMeter.close), 9 distinct notes in all, none more than 8 in a record
        List<String> first = sorted(UsageMeter.NOT_SAMPLED, UsageMeter.UNATTRIBUTED_BUSY, UsageMeter.NO_PROCESSES,
                UsageMeter.SPLIT_EQUALLY, MIG_UTIL);
        List<String> second = sorted(UsageMeter.ESTIMATED_POWER, UsageMeter.NO_ENERGY, NO_METRICS,
                UsageMeter.SPLIT_BY_UTIL);
        since = DAY.atStartOfDay().toInstant(ZoneOffset.UTC);
        until = since.plusSeconds(86_400);
        AccountingStore.Writer w = store.openWriter().orElseThrow();
        w.append(List.of(interval(t0, t0.plusSeconds(60), true, Optional.empty(), first),
                interval(t0.plusSeconds(60), t0.plusSeconds(120), false, Optional.of("RELEASED"), second)));
        return w;
    }

    @Test
    void aWholeDayWithNineDistinctNotesReportsTheSameNotesBeforeAndAfterCompaction(@TempDir Path state) {
        AccountingStore store = AccountingStore.at(state);
        Map<GroupBy, Object> before = new EnumMap<>(GroupBy.class);
        Map<GroupBy, Object> after = new EnumMap<>(GroupBy.class);
        try (AccountingStore.Writer w = fixture(store)) {
            for (GroupBy by : List.of(GroupBy.OWNER, GroupBy.DEVICE, GroupBy.DAY)) {
                before.put(by, ReportViews.report(UsageReport.of(store, since, until, by)).get("rows"));
            }
            w.compact(DAY);
        }
        assertThat(store.hasSummary(DAY)).as("the day was compacted").isTrue();
        for (GroupBy by : List.of(GroupBy.OWNER, GroupBy.DEVICE, GroupBy.DAY)) {
            after.put(by, ReportViews.report(UsageReport.of(store, since, until, by)).get("rows"));
        }
        // the premise as filed said the report over intervals kept NO_PROCESSES (the first 8 read); since the fix
        // both paths keep the 8 smallest in text order, so the premise is that 8 of the 9 notes are shown
        assertThat(before.get(GroupBy.OWNER).toString()).as("before compaction (the premise)")
                .contains(NO_METRICS).doesNotContain(UsageMeter.NO_PROCESSES);
        SoftAssertions soft = new SoftAssertions();
        for (GroupBy by : List.of(GroupBy.OWNER, GroupBy.DEVICE, GroupBy.DAY)) {
            soft.assertThat(after.get(by))
                    .as("report --by %s --json of one whole day, after compaction (the summary rows): expected the"
                            + " same rows (the same 8 notes) as before it; the report over intervals keeps the first"
                            + " 8 notes read, the summary the 8 smallest, so \"%s\" is dropped and \"%s\" appears",
                            by, UsageMeter.NO_PROCESSES, NO_METRICS)
                    .isEqualTo(before.get(by));
        }
        soft.assertAll();
    }

    /**
     * The same over the compacted journal's intervals (a period that is not whole days, and --by allocation, never
     * read from a summary): compaction's merge keeps an allocation's 8 smallest notes per GPU.
     */
    @Test
    void partOfACompactedDayAndByAllocationReportTheSameNotesBeforeAndAfterCompaction(@TempDir Path state) {
        AccountingStore store = AccountingStore.at(state);
        Instant from = DAY.atStartOfDay().toInstant(ZoneOffset.UTC).plusSeconds(1_800);
        Instant to = from.plusSeconds(7_200);
        Map<GroupBy, Object> before = new EnumMap<>(GroupBy.class);
        Map<GroupBy, Object> after = new EnumMap<>(GroupBy.class);
        try (AccountingStore.Writer w = fixture(store)) {
            for (GroupBy by : GroupBy.values()) {
                before.put(by, ReportViews.report(UsageReport.of(store, from, to, by)).get("rows"));
            }
            w.compact(DAY);
        }
        assertThat(store.hasSummary(DAY)).as("the day was compacted").isTrue();
        for (GroupBy by : GroupBy.values()) {
            after.put(by, ReportViews.report(UsageReport.of(store, from, to, by)).get("rows"));
        }
        SoftAssertions soft = new SoftAssertions();
        for (GroupBy by : GroupBy.values()) {
            soft.assertThat(after.get(by))
                    .as("report --since %s --until %s --by %s --json, after the day was compacted (its merged"
                            + " interval): expected the same rows (the same 8 notes) as before; \"%s\" is dropped and"
                            + " \"%s\" appears", from, to, by, UsageMeter.NO_PROCESSES, NO_METRICS)
                    .isEqualTo(before.get(by));
        }
        soft.assertAll();
    }

    /** gpusched report ID (the jobstats view) lists every note of a GPU before compaction, 8 after it. */
    @Test
    void theReportOfTheAllocationSaysTheSameBeforeAndAfterCompaction(@TempDir Path state) {
        AccountingStore store = AccountingStore.at(state);
        Map<String, Object> before;
        try (AccountingStore.Writer w = fixture(store)) {
            before = ReportViews.allocation(AllocationUsage.find(store, "a1-1").orElseThrow());
            w.compact(DAY);
        }
        assertThat(store.hasSummary(DAY)).as("the day was compacted").isTrue();
        Map<String, Object> after = ReportViews.allocation(AllocationUsage.find(store, "a1-1").orElseThrow());
        assertThat(after.get("gpus").toString())
                .as("gpusched report a1-1 --json after its day was compacted: expected the same GPU notes as before"
                        + " (%s), but compaction's merge kept 8 of the 9 and \"%s\" is gone", before.get("gpus"),
                        UsageMeter.NO_PROCESSES)
                .isEqualTo(before.get("gpus").toString());
    }

    /**
     * The day row's notes are the owners' rows' (each within its 8, nothing lost in the summary), and still not the
     * ones the intervals give: bob's GPU 1 has 4 notes at 01:00 and a fifth at 03:00, alice's GPU 0 4 others at
     * 02:00. Over the intervals the day row keeps the first 8 read (bob's fifth is dropped); over the summary, bob's
     * row's 5 and alice's 3 smallest (her "not measured: the sweep read no metrics" is dropped).
     */
    @Test
    void aDayOfTwoOwnersEachWithinTheBoundReportsTheSameNotesBeforeAndAfterCompaction(@TempDir Path state) {
        AccountingStore store = AccountingStore.at(state);
        Instant midnight = DAY.atStartOfDay().toInstant(ZoneOffset.UTC);
        Instant t1 = midnight.plusSeconds(3_600);
        Instant t2 = midnight.plusSeconds(7_200);
        Instant t3 = midnight.plusSeconds(10_800);
        Object before;
        try (AccountingStore.Writer w = store.openWriter().orElseThrow()) {
            w.append(List.of(
                    interval("b2-1", "bob", 1, t1, t1.plusSeconds(60), true, Optional.empty(),
                            sorted(UsageMeter.UNATTRIBUTED_BUSY, UsageMeter.NO_PROCESSES, MIG_UTIL,
                                    UsageMeter.NOT_SAMPLED)),
                    interval("a1-1", "alice", 0, t2, t2.plusSeconds(60), true, Optional.of("RELEASED"),
                            sorted(UsageMeter.ESTIMATED_POWER, UsageMeter.NO_ENERGY, UsageMeter.SPLIT_BY_UTIL,
                                    NO_METRICS)),
                    interval("b2-1", "bob", 1, t3, t3.plusSeconds(60), false, Optional.of("RELEASED"),
                            List.of(UsageMeter.SPLIT_EQUALLY))));
            before = ReportViews.report(UsageReport.of(store, midnight, midnight.plusSeconds(86_400), GroupBy.DAY))
                    .get("rows");
            w.compact(DAY);
        }
        assertThat(store.hasSummary(DAY)).as("the day was compacted").isTrue();
        Object after = ReportViews.report(UsageReport.of(store, midnight, midnight.plusSeconds(86_400), GroupBy.DAY))
                .get("rows");
        assertThat(after)
                .as("report --by day --json of one whole day of alice (4 notes) and bob (5 notes), after compaction:"
                        + " expected the same 8 notes as before it (every owner row holds all its notes); the summary"
                        + " path keeps bob's \"%s\" and drops alice's \"%s\"", UsageMeter.SPLIT_EQUALLY, NO_METRICS)
                .isEqualTo(before);
    }

    private static List<String> sorted(String... notes) {
        List<String> l = new ArrayList<>(List.of(notes));
        l.sort(null);
        return l;
    }

    private static Interval interval(Instant from, Instant to, boolean first, Optional<String> end,
            List<String> notes) {
        return interval("a1-1", "alice", 5, from, to, first, end, notes);
    }

    private static Interval interval(String id, String owner, int gpu, Instant from, Instant to, boolean first,
            Optional<String> end, List<String> notes) {
        UsageFigures f = new UsageFigures();
        f.heldMillis = to.toEpochMilli() - from.toEpochMilli();
        f.measuredMillis = f.heldMillis;
        f.utilizationMillis = 0;
        f.memoryPeakBytes = 1L << 30;
        DeviceUsage d = new DeviceUsage(gpu, "GPU-5d2c0d6e-9c1f-4b2a-8e61-3f0a7c9d1e4" + gpu, f,
                OptionalLong.empty(), notes);
        return new Interval(id, Optional.of(owner), OptionalLong.empty(), Optional.of("train"), from, to, first, end,
                false, Optional.empty(), List.of(d));
    }
}
