package io.gpusched.accounting.adversarial.review57;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord;
import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.IdleStep;
import io.gpusched.accounting.RecordCodec;
import io.gpusched.accounting.ReportViews;
import io.gpusched.accounting.UsageReport;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review 57. Review 53 made the text report's row of allocations without an owner read unlike any owner's row: its
 * label {@code (no owner)} gets a {@code *} "while an owner of the report has that name (any printable text can be an
 * owner's)". But the label shown is not the one checked: a row whose owner or allocations the idle policy flagged is
 * printed as {@code label + " (idle)"} (ReportViews.cells), and noOwnerLabel compares only the bare label with the
 * owners' names. An owner named {@code (no owner) (idle)} (printable text) and flagged allocations without an owner
 * give two rows labelled {@code (no owner) (idle)}, with different figures: which is the unowned usage?
 */
@Tag("adversarial")
class OwnerNamedLikeTheIdleNoOwnerRowTest {

    @Test
    void theFlaggedNoOwnerRowReadsUnlikeEveryOwnersRow(@TempDir Path state) {
        AccountingStore store = AccountingStore.at(state);
        Instant t0 = Instant.parse("2026-05-01T10:00:00Z");
        long ms = t0.toEpochMilli();
        try (AccountingStore.Writer w = store.openWriter().orElseThrow()) {
            w.append(List.of(interval("a1-1", "\"owner\":\"(no owner) (idle)\",", ms, 60_000),
                    interval("a1-2", "", ms, 120_000),
                    new IdleAction(t0.plusSeconds(100), "a1-2", Optional.empty(), IdleStep.FLAGGED,
                            Duration.ofMinutes(30), "idle for 30 min")));
        }
        String text = ReportViews.text(UsageReport.of(store, t0, t0.plusSeconds(3600), UsageReport.GroupBy.OWNER));
        List<String> labels = text.lines().skip(2).filter(l -> l.contains("  "))
                .map(l -> l.split("  ")[0].strip()).filter(l -> l.startsWith("(no owner)")).toList();
        assertThat(labels)
                .as("gpusched report by owner: the row of allocations without an owner (flagged idle) should read"
                        + " unlike the row of the owner named \"(no owner) (idle)\"; both are labelled the same:%n%s",
                        text)
                .hasSize(2)
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
