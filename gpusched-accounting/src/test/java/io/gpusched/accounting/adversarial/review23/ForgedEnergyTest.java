package io.gpusched.accounting.adversarial.review23;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.ReportViews;
import io.gpusched.accounting.UsageReport;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A line in the store that a member of the state group (or a bit flip before the checksum was taken, or a buggy
 * backend's counter) wrote with an energy no GPU can draw: 9.2 EJ in one minute. RecordCodec's contract: "values out
 * of range ... are refused"; it bounds held, measured, utilization and peaks against each other and the interval, but
 * not the energy. The report then sums it with plain long arithmetic: the node's total wraps negative.
 */
@Tag("adversarial")
class ForgedEnergyTest {
    @TempDir
    Path dir;

    private static String line(String json) {
        CRC32C crc = new CRC32C();
        byte[] b = json.getBytes(StandardCharsets.UTF_8);
        crc.update(b, 0, b.length);
        return String.format("%08x %s%n", crc.getValue(), json);
    }

    private static String interval(String id, String owner, long from, long e) {
        return "{\"k\":\"i\",\"id\":\"" + id + "\",\"owner\":\"" + owner + "\",\"from\":" + from + ",\"to\":"
                + (from + 60_000) + ",\"first\":true,\"gpus\":[{\"i\":0,\"uuid\":\"GPU-x-0\",\"held\":60000,"
                + "\"meas\":60000,\"um\":60000,\"us\":3000000.0,\"up\":50.0,\"idle\":0,\"e\":" + e
                + ",\"ee\":0,\"em\":60000}]}";
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void anImpossibleEnergyInOneRecordNeitherWrapsTheTotalNorIsTakenAsMeasured() throws Exception {
        Path acc = Files.createDirectories(dir.resolve(AccountingStore.DIR));
        long from = Instant.parse("2026-03-02T10:00:00Z").toEpochMilli();
        Files.writeString(acc.resolve("2026-03-02.log"), line(interval("a-1", "alice", from, 15_000_000L))
                + line(interval("m-1", "mallory", from + 60_000, Long.MAX_VALUE - 1_000)));
        UsageReport r = UsageReport.of(AccountingStore.at(dir), Instant.parse("2026-03-02T00:00:00Z"),
                Instant.parse("2026-03-03T00:00:00Z"), UsageReport.GroupBy.OWNER);
        assertThat(r.total().energyMillijoules()).as("the node's energy over the day, mJ; report:%n%s%nwarnings %s",
                ReportViews.text(r), r.warnings()).isGreaterThanOrEqualTo(15_000_000L);
        assertThat(r.total().kilowattHours()).as("kWh").isGreaterThanOrEqualTo(0);
    }
}
