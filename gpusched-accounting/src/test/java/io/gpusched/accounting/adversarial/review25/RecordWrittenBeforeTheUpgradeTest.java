package io.gpusched.accounting.adversarial.review25;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.AllocationUsage;
import io.gpusched.accounting.ReportViews;
import io.gpusched.accounting.UsageReport;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * b4813444 makes RecordCodec refuse, as malformed, any interval whose energy is above 10 kW x em. Stores written by
 * the sampler before it hold such records: review23's EnergyCounterGlitchTest shows the old meter writing one (a single
 * garbage counter read, 10^12 J "exact") for an ordinary 3-minute allocation. After the upgrade the whole line is
 * skipped with a warning, so the allocation's GPU-seconds, its grant and its release vanish from every report of that
 * past day (and `report ID` finds nothing): the figure that was wrong is the energy, yet the figures that were right
 * go with it. The check only needs the energy to be treated as not measured (or estimated), not the record dropped.
 */
@Tag("adversarial")
class RecordWrittenBeforeTheUpgradeTest {
    @TempDir
    Path dir;

    private static String line(String json) {
        CRC32C crc = new CRC32C();
        byte[] b = json.getBytes(StandardCharsets.UTF_8);
        crc.update(b, 0, b.length);
        return String.format("%08x %s%n", crc.getValue(), json);
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void anOldRecordWithAGlitchedEnergyKeepsItsGpuSecondsInReports() throws Exception {
        Path acc = Files.createDirectories(dir.resolve(AccountingStore.DIR));
        long from = Instant.parse("2026-03-02T10:00:00Z").toEpochMilli();
        // what the sampler wrote before b4813444 for review23's glitch: 3 minutes held, one garbage counter read
        String old = "{\"k\":\"i\",\"id\":\"a-1\",\"owner\":\"alice\",\"from\":" + from + ",\"to\":" + (from + 180_000)
                + ",\"first\":true,\"end\":\"RELEASED\",\"gpus\":[{\"i\":0,\"uuid\":\"GPU-x-0\",\"held\":180000,"
                + "\"meas\":180000,\"um\":180000,\"us\":10800000.0,\"up\":60.0,\"idle\":0,\"e\":1000000054000000,"
                + "\"ee\":0,\"em\":180000}]}";
        Files.writeString(acc.resolve("2026-03-02.log"), line(old));
        AccountingStore store = AccountingStore.at(dir);
        UsageReport r = UsageReport.of(store, Instant.parse("2026-03-02T00:00:00Z"),
                Instant.parse("2026-03-03T00:00:00Z"), UsageReport.GroupBy.OWNER);
        assertThat(r.total().heldMillis()).as("GPU-ms of the day; report:%n%s%nwarnings %s", ReportViews.text(r),
                r.warnings()).isEqualTo(180_000L);
        assertThat(AllocationUsage.find(store, "a-1").map(AllocationUsage::end)).as("report a-1: how it ended")
                .contains(Optional.of("RELEASED"));
    }
}
