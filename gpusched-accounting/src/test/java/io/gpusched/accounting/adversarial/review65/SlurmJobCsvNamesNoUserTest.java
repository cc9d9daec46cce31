package io.gpusched.accounting.adversarial.review65;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.ReportViews;
import io.gpusched.accounting.UsageReport;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review 65. docs/ACCOUNTING.md, "Reports": "{@code report --by pod} and {@code --by slurm-job} have one row per pod
 * ({@code <namespace>/<pod>}, then its namespace) or job (its id, then its user)", and the issue asks for the
 * {@code sacct} view of who ran what. The text table ({@code 777 alice}) and {@code --json} ({@code "owner":
 * "alice"}) give a Slurm job's user; {@code --csv}, the form meant for spreadsheets and scripts, has only the job id:
 * whose job each row is cannot be read from it at all (a Slurm job id says nothing of its user, and ids are reused).
 */
class SlurmJobCsvNamesNoUserTest {
    @TempDir
    Path state;

    private static String line(String json) {
        CRC32C c = new CRC32C();
        c.update(json.getBytes(StandardCharsets.UTF_8));
        return String.format("%08x %s%n", c.getValue(), json);
    }

    private static String interval(String id, String owner, String job, long from, long to, int gpu, double util) {
        long held = to - from;
        return "{\"k\":\"i\",\"id\":\"" + id + "\",\"owner\":\"" + owner + "\",\"job\":\"" + job + "\",\"from\":"
                + from + ",\"to\":" + to + ",\"first\":true,\"end\":\"GONE\",\"gpus\":[{\"i\":" + gpu
                + ",\"uuid\":\"GPU-" + gpu + "\",\"held\":" + held + ",\"meas\":" + held + ",\"um\":" + held
                + ",\"us\":" + (util * held) + ",\"up\":" + util + ",\"idle\":0,\"mp\":1073741824,\"e\":"
                + (held * 100) + ",\"ee\":0,\"em\":" + held + "}]}";
    }

    @Test
    void slurmJobCsvRowsNameTheJobsUser() throws IOException {
        long t = Instant.parse("2026-03-02T10:00:00Z").toEpochMilli();
        Path dir = Files.createDirectories(state.resolve("accounting"));
        Files.writeString(dir.resolve("2026-03-02.log"),
                line(interval("slurm-job:777@" + t, "alice", "777", t, t + 60_000, 2, 90))
                        + line(interval("slurm-job:778@" + t, "bob", "778", t, t + 60_000, 3, 40)));
        UsageReport r = UsageReport.of(AccountingStore.at(state), Instant.parse("2026-03-02T00:00:00Z"),
                Instant.parse("2026-03-03T00:00:00Z"), UsageReport.GroupBy.SLURM_JOB);
        assertThat(ReportViews.text(r)).as("precondition: the table names each job's user").contains("777 alice")
                .contains("778 bob");
        String csv = ReportViews.csv(r);
        assertThat(csv).as("--by slurm-job --csv must carry each job's user, as the table and --json do (\"its id,"
                + " then its user\"); it has only the ids:%n%s", csv).contains("alice").contains("bob");
    }
}
