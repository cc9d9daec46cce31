package io.gpusched.accounting.adversarial.review56;

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
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review 56. Review 53 made the text report's "(no owner)" row unlike any owner's row ("any printable text can be an
 * owner's", docs/ACCOUNTING.md), but the table has another fixed label in its first column: the total line,
 * {@code total}. An owner named {@code total} (a valid owner: printable text) gets a row labelled {@code total}, and
 * {@code gpusched report} (by owner, the default) then prints two lines labelled {@code total}: the owner's and the
 * report's, with different figures; a reader (or a script taking the line that starts with "total") cannot tell
 * which is the sum.
 */
@Tag("adversarial")
class OwnerNamedLikeTheTotalLineTest {

    @Test
    void anOwnersRowReadsUnlikeTheTotalLine(@TempDir Path state) {
        AccountingStore store = AccountingStore.at(state);
        Instant t0 = Instant.parse("2026-05-01T10:00:00Z");
        long ms = t0.toEpochMilli();
        try (AccountingStore.Writer w = store.openWriter().orElseThrow()) {
            w.append(List.of(interval("a1-1", "\"owner\":\"total\",", ms, 60_000),
                    interval("a1-2", "\"owner\":\"alice\",", ms, 120_000)));
        }
        String text = ReportViews.text(UsageReport.of(store, t0, t0.plusSeconds(3600), UsageReport.GroupBy.OWNER));
        List<String> labelledTotal = text.lines().filter(l -> l.split("  ")[0].strip().equals("total")).toList();
        assertThat(labelledTotal)
                .as("gpusched report by owner: only the total line should be labelled \"total\"; the row of the owner"
                        + " named \"total\" (1 min of 3) reads the same as the report's total line:%n%s", text)
                .hasSize(1);
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
