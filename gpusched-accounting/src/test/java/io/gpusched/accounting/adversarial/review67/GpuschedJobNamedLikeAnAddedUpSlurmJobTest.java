package io.gpusched.accounting.adversarial.review67;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.AllocationUsage;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.Optional;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review 67. Review66's fix (cdf1072a) to AllocationUsage.findJob: a job id that starts with {@code slurm-job:} (and has
 * no {@code @}) is now taken as "the id an added-up Slurm job is shown with" and only that Slurm job's tracks are kept.
 * A gpusched job id is any printable text (GpuRequest: up to 256 characters), so a gpusched job may well be called
 * {@code slurm-job:4242} (a site that runs its Slurm jobs' GPU work through {@code gpusched run --job slurm-job:$ID},
 * say). Before cdf1072a, {@code gpusched report slurm-job:4242} and {@code GET /api/v1/usage?allocation=slurm-job:4242}
 * showed that job's one allocation (docs/ACCOUNTING.md: "report ID (an allocation id, or a job id: the allocation the
 * job ran as ...)"); now the filter drops it, nothing is left, and the job is said to have no usage recorded at all.
 */
class GpuschedJobNamedLikeAnAddedUpSlurmJobTest {
    @TempDir
    Path state;

    private static String line(String json) {
        CRC32C c = new CRC32C();
        c.update(json.getBytes(StandardCharsets.UTF_8));
        return String.format("%08x %s%n", c.getValue(), json);
    }

    private static String interval(String id, String owner, String job, long from, long to, int gpu) {
        long held = to - from;
        return "{\"k\":\"i\",\"id\":\"" + id + "\",\"owner\":\"" + owner + "\",\"job\":\"" + job + "\",\"from\":"
                + from + ",\"to\":" + to + ",\"first\":true,\"end\":\"RELEASED\",\"gpus\":[{\"i\":" + gpu
                + ",\"uuid\":\"GPU-" + gpu + "\",\"held\":" + held + ",\"meas\":" + held + ",\"um\":" + held
                + ",\"us\":" + (70.0 * held) + ",\"up\":70.0,\"idle\":0,\"mp\":1073741824,\"e\":" + (held * 100)
                + ",\"ee\":0,\"em\":" + held + "}]}";
    }

    @Test
    void aGpuschedJobWhoseIdStartsWithSlurmJobIsStillFoundByItsJobId() throws IOException {
        long t = Instant.parse("2026-03-02T10:00:00Z").toEpochMilli();
        Path dir = Files.createDirectories(state.resolve("accounting"));
        // one gpusched allocation (not a pod's or Slurm job's track), of job "slurm-job:4242"; no Slurm track at all
        Files.writeString(dir.resolve("2026-03-02.log"),
                line(interval("f00d42-1", "alice", "slurm-job:4242", t, t + 600_000, 1)));
        AccountingStore store = AccountingStore.at(state);
        assertThat(AllocationUsage.allocationsOfJob(store, "slurm-job:4242", 11))
                .as("precondition: the store names allocation f00d42-1 as job slurm-job:4242's")
                .containsExactly("f00d42-1");
        Optional<AllocationUsage> u = AllocationUsage.findJob(store, "slurm-job:4242");
        assertThat(u.map(AllocationUsage::id)).as("gpusched report slurm-job:4242 (and ?allocation=slurm-job:4242)"
                + " must show allocation f00d42-1, the one allocation gpusched job \"slurm-job:4242\" ran as (it did"
                + " before cdf1072a); findJob now takes the id for an added-up Slurm job 4242, keeps only Slurm"
                + " tracks, and answers %s: \"no usage is recorded\"", u).contains("f00d42-1");
    }
}
