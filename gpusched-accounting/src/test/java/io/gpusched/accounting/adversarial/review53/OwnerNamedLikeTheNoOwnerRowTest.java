package io.gpusched.accounting.adversarial.review53;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord;
import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.RecordCodec;
import io.gpusched.accounting.ReportViews;
import io.gpusched.accounting.UsageReport;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Instant;
import java.util.List;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review 53: {@code gpusched report} (by owner, the default) labels the row of allocations without an owner
 * "(no owner)" (docs/ACCOUNTING.md). Owners are printable text, spaces allowed ({@code GpuRequest}): "(no owner)" is
 * a valid owner, as {@code -} is (OwnerKeyTest keeps {@code -} apart from the no-owner row). An allocation of the
 * owner {@code (no owner)} and one without an owner then print as two rows that read the same, so the table cannot say
 * whose GPU-hours are whose (the JSON and CSV keep them apart: keys "(no owner)" and ""; the console's usage page,
 * usage.js {@code shown}, labels them alike too).
 */
class OwnerNamedLikeTheNoOwnerRowTest {

    @Test
    void theNoOwnerRowReadsUnlikeAnyOwnersRow(@TempDir Path state) {
        AccountingStore store = AccountingStore.at(state);
        Instant t0 = Instant.parse("2026-05-01T10:00:00Z");
        long ms = t0.toEpochMilli();
        try (AccountingStore.Writer w = store.openWriter().orElseThrow()) {
            w.append(List.of(interval("a1-1", "\"owner\":\"(no owner)\",", ms, 60_000),
                    interval("a1-2", "", ms, 120_000)));
        }
        String text = ReportViews.text(UsageReport.of(store, t0, t0.plusSeconds(3600), UsageReport.GroupBy.OWNER));
        List<String> rows = text.lines().filter(l -> l.startsWith("(no owner)")).toList();
        assertThat(rows).as("the premise: both rows are printed:%n%s", text).hasSize(2);
        String first = rows.get(0).substring(0, rows.get(0).indexOf("  "));
        String second = rows.get(1).substring(0, rows.get(1).indexOf("  "));
        assertThat(first)
                .as("gpusched report by owner: the row of the owner named \"(no owner)\" (1 min) and the row of"
                        + " allocations without an owner (2 min) should be told apart by their labels; both read"
                        + " \"(no owner)\":%n%s", text)
                .isNotEqualTo(second);
    }

    private static AccountingRecord interval(String id, String owner, long from, long held) {
        String json = "{\"k\":\"i\",\"id\":\"" + id + "\"," + owner + "\"from\":" + from + ",\"to\":" + (from + held)
                + ",\"first\":true,\"end\":\"RELEASED\",\"gpus\":[{\"i\":0,\"uuid\":\"GPU-0\",\"held\":" + held
                + ",\"meas\":" + held + ",\"um\":" + held + ",\"us\":" + 50.0 * held + ",\"up\":50.0,\"idle\":0,"
                + "\"e\":0,\"ee\":0,\"em\":0}]}";
        CRC32C c = new CRC32C();
        byte[] b = json.getBytes(StandardCharsets.UTF_8);
        c.update(b, 0, b.length);
        return RecordCodec.decode(String.format("%08x", c.getValue()) + " " + json);
    }
}
