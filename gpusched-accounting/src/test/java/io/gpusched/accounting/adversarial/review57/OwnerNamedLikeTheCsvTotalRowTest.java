package io.gpusched.accounting.adversarial.review57;

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
 * Review 57. Review 56 made the text report's total line unlike an owner named {@code total} ({@code total*}), but
 * {@code gpusched report --csv} (ReportViews.csv) still ends with a row keyed {@code "total"}: an owner named
 * {@code total} (any printable text can be an owner's, docs/ACCOUNTING.md) gets a row keyed {@code "total"} too. The
 * CSV is the machine-readable form: a script that takes the row keyed "total" as the sum (or drops it to sum the
 * rows) cannot tell the owner's row from the report's total. The no-owner row is told apart in CSV (an empty key, no
 * owner can be blank); the total row is not.
 */
@Tag("adversarial")
class OwnerNamedLikeTheCsvTotalRowTest {

    @Test
    void anOwnersCsvRowIsKeyedUnlikeTheTotalRow(@TempDir Path state) {
        AccountingStore store = AccountingStore.at(state);
        Instant t0 = Instant.parse("2026-05-01T10:00:00Z");
        long ms = t0.toEpochMilli();
        try (AccountingStore.Writer w = store.openWriter().orElseThrow()) {
            w.append(List.of(interval("a1-1", "\"owner\":\"total\",", ms, 60_000),
                    interval("a1-2", "\"owner\":\"alice\",", ms, 120_000)));
        }
        String csv = ReportViews.csv(UsageReport.of(store, t0, t0.plusSeconds(3600), UsageReport.GroupBy.OWNER));
        List<String> keys = csv.lines().skip(1).map(l -> l.substring(0, l.indexOf("\","))).toList();
        assertThat(keys)
                .as("gpusched report --csv by owner: each row's key should be its own; the row of the owner named"
                        + " \"total\" (1 min of 3) is keyed like the report's total row:%n%s", csv)
                .doesNotHaveDuplicates();
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
