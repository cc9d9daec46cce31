package io.gpusched.cli.adversarial.review65;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.cli.GpuschedCommand;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review 65. Issue 34: "{@code gpusched report ID} for one allocation or job (the {@code jobstats}/{@code sacct}
 * view: per GPU, with a verdict line)"; docs/ACCOUNTING.md: "{@code gpusched report <job id>} shows one". A Slurm
 * job's track ends at the first sweep (1 s apart) that lists none of its processes, so an ordinary batch job of two
 * GPU steps ({@code srun} step 0, a few seconds of CPU work, step 1) is stored as two tracks of the same job id. The
 * store knows both are job 777 (the {@code --by slurm-job} row sums them), yet {@code gpusched report 777} refuses
 * ("ran as 2 allocations ... give one of them") and names only internal track ids: the one Slurm job's per-GPU view
 * and verdict, which {@code jobstats} gives for any job, cannot be had.
 */
class ReportOfAMultiStepSlurmJobTest {
    @TempDir
    Path dir;

    private static String line(String json) {
        CRC32C c = new CRC32C();
        c.update(json.getBytes(StandardCharsets.UTF_8));
        return String.format("%08x %s%n", c.getValue(), json);
    }

    private static String interval(String id, long from, long to, int gpu, double util) {
        long held = to - from;
        return "{\"k\":\"i\",\"id\":\"" + id + "\",\"owner\":\"alice\",\"job\":\"777\",\"from\":" + from + ",\"to\":"
                + to + ",\"first\":true,\"end\":\"GONE\",\"gpus\":[{\"i\":" + gpu + ",\"uuid\":\"GPU-" + gpu
                + "\",\"held\":" + held + ",\"meas\":" + held + ",\"um\":" + held + ",\"us\":" + (util * held)
                + ",\"up\":" + util + ",\"idle\":0,\"mp\":1073741824,\"e\":" + (held * 100) + ",\"ee\":0,\"em\":"
                + held + "}]}";
    }

    @Test
    void aSlurmJobOfTwoGpuStepsIsReportedAsOneJob() throws Exception {
        Path state = dir.resolve("state");
        Path acc = Files.createDirectories(state.resolve("accounting"));
        long t = Instant.parse("2026-03-02T10:00:00Z").toEpochMilli();
        long t2 = t + 65_000; // step 1 starts 5 s after step 0 ended
        Files.writeString(acc.resolve("2026-03-02.log"),
                line(interval("slurm-job:777@" + t, t, t + 60_000, 0, 80))
                        + line(interval("slurm-job:777@" + t2, t2, t2 + 60_000, 0, 60)));
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int exit = GpuschedCommand.commandLine(new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8)).execute("--state-dir", state.toString(),
                        "--simulate", "pcie-4xa10", "report", "777");
        String o = out.toString(StandardCharsets.UTF_8);
        String e = err.toString(StandardCharsets.UTF_8);
        assertThat(exit).as("gpusched report 777: Slurm job 777 (two GPU steps, one job, one user) must be shown as"
                + " the one job it is, its two minutes on GPU 0 and a verdict; it was refused:%n%s%s", o, e)
                .isZero();
        assertThat(o).as("the job's whole use: 2 minutes of GPU 0 (0.03 GPU-hours), 70 %% mean utilization")
                .contains("0.03 GPU-hours").contains("70 % mean utilization");
    }
}
