package io.gpusched.accounting.adversarial.review53;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord;
import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.RecordCodec;
import io.gpusched.accounting.ReportViews;
import io.gpusched.accounting.UsageReport;
import io.gpusched.accounting.UsageReport.GroupBy;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Instant;
import java.time.LocalDate;
import java.time.ZoneOffset;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.zip.CRC32C;
import org.assertj.core.api.SoftAssertions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review 53: compaction must not change what a report says about a day. docs/ACCOUNTING.md: "What the hardware
 * cannot tell is said, not guessed (each device of a record carries notes)", and a compacted day's summary is what
 * "reports over whole days read ... alone". Summary rows ({@code k: d}) carry neither the GPU indices nor the notes,
 * so after compaction {@code gpusched report --by owner|day --json} (and {@code /api/v1/usage}) give {@code "gpus": []}
 * and every row by owner, device or day shows {@code "notes": []}: a MIG allocation's "utilization not measured" reads
 * as n/m with no reason, and which GPUs an owner used is gone, for the same day and the same figures.
 */
class CompactedDayReportLosesGpusAndNotesTest {
    private static final LocalDate DAY = LocalDate.parse("2026-05-01");
    private static final String NOTE = "utilization not measured: NVML has no utilization per MIG device";

    @Test
    void aWholeDayReportsTheSameGpusAndNotesBeforeAndAfterCompaction(@TempDir Path state) {
        AccountingStore store = AccountingStore.at(state);
        long t0 = DAY.atStartOfDay().toInstant(ZoneOffset.UTC).toEpochMilli() + 3_600_000L;
        // one MIG allocation of alice on GPU 2, two checkpoint intervals, then released: what the sampler writes
        String device = "\"gpus\":[{\"i\":2,\"uuid\":\"MIG-5d2c0d6e-9c1f-4b2a-8e61-3f0a7c9d1e42\",\"held\":60000,"
                + "\"meas\":60000,\"um\":0,\"us\":0.0,\"idle\":0,\"mp\":1073741824,\"e\":0,\"ee\":0,\"em\":0,"
                + "\"notes\":[\"" + NOTE + "\"]}]";
        List<AccountingRecord> records = List.of(
                record("{\"k\":\"i\",\"id\":\"a1-1\",\"owner\":\"alice\",\"job\":\"train\",\"from\":" + t0
                        + ",\"to\":" + (t0 + 60_000) + ",\"first\":true," + device + "}"),
                record("{\"k\":\"i\",\"id\":\"a1-1\",\"owner\":\"alice\",\"job\":\"train\",\"from\":" + (t0 + 60_000)
                        + ",\"to\":" + (t0 + 120_000) + ",\"end\":\"RELEASED\"," + device + "}"));
        Instant since = DAY.atStartOfDay().toInstant(ZoneOffset.UTC);
        Instant until = since.plusSeconds(86_400);
        Map<GroupBy, Object> before = new EnumMap<>(GroupBy.class);
        Map<GroupBy, Object> after = new EnumMap<>(GroupBy.class);
        try (AccountingStore.Writer w = store.openWriter().orElseThrow()) {
            w.append(records);
            for (GroupBy by : List.of(GroupBy.OWNER, GroupBy.DEVICE, GroupBy.DAY)) {
                before.put(by, ReportViews.report(UsageReport.of(store, since, until, by)).get("rows"));
            }
            w.compact(DAY);
        }
        assertThat(store.hasSummary(DAY)).as("the day was compacted").isTrue();
        for (GroupBy by : List.of(GroupBy.OWNER, GroupBy.DEVICE, GroupBy.DAY)) {
            after.put(by, ReportViews.report(UsageReport.of(store, since, until, by)).get("rows"));
        }
        assertThat(before.get(GroupBy.OWNER).toString()).as("before compaction (the premise)").contains("gpus=[2]")
                .contains(NOTE);
        SoftAssertions soft = new SoftAssertions();
        for (GroupBy by : List.of(GroupBy.OWNER, GroupBy.DEVICE, GroupBy.DAY)) {
            soft.assertThat(after.get(by))
                    .as("report --by %s --json of one whole day, after compaction: expected the same rows as before"
                            + " it (gpus [2], notes [\"%s\"]); the summary drops the GPUs and the notes", by, NOTE)
                    .isEqualTo(before.get(by));
        }
        soft.assertAll();
    }

    private static AccountingRecord record(String json) {
        CRC32C c = new CRC32C();
        byte[] b = json.getBytes(StandardCharsets.UTF_8);
        c.update(b, 0, b.length);
        return RecordCodec.decode(String.format("%08x", c.getValue()) + " " + json);
    }
}
