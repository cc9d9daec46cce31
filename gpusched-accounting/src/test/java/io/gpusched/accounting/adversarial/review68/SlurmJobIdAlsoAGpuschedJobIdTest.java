package io.gpusched.accounting.adversarial.review68;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.AllocationUsage;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicReference;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review 68. Review67's fix (ec9f1eda) to AllocationUsage.findJob: {@code slurm-job:<id>} is read as that Slurm job's
 * tracks "only when no job is named so itself". docs/ACCOUNTING.md ("Reports") promises the id an added-up Slurm job is
 * shown with, {@code Allocation slurm-job:<id>}, is "an id {@code report} and the REST API take back", and everywhere
 * else an id that names two things is refused naming them (a job id that ran as several allocations, a Slurm job id two
 * users had) or shown with a note (an allocation id that is also a job's: review56).
 *
 * <p>Here alice's Slurm job 4242 ran as two tracks and bob ran a gpusched job he called {@code slurm-job:4242} (any
 * printable text is a job id). {@code report 4242} shows alice's added-up job as {@code slurm-job:4242}; giving that id
 * back ({@code report slurm-job:4242}, {@code ?allocation=slurm-job:4242}) silently answers with bob's allocation, a
 * different user's job, as if it were the one shown: nothing says the id names two things.
 */
class SlurmJobIdAlsoAGpuschedJobIdTest {
    @TempDir
    Path state;

    private static String line(String json) {
        CRC32C c = new CRC32C();
        c.update(json.getBytes(StandardCharsets.UTF_8));
        return String.format("%08x %s%n", c.getValue(), json);
    }

    private static String interval(String id, String owner, String job, long from, long to, int gpu, String end) {
        long held = to - from;
        return "{\"k\":\"i\",\"id\":\"" + id + "\",\"owner\":\"" + owner + "\",\"job\":\"" + job + "\",\"from\":"
                + from + ",\"to\":" + to + ",\"first\":true,\"end\":\"" + end + "\",\"gpus\":[{\"i\":" + gpu
                + ",\"uuid\":\"GPU-" + gpu + "\",\"held\":" + held + ",\"meas\":" + held + ",\"um\":" + held
                + ",\"us\":" + (70.0 * held) + ",\"up\":70.0,\"idle\":0,\"mp\":1073741824,\"e\":" + (held * 100)
                + ",\"ee\":0,\"em\":" + held + "}]}";
    }

    @Test
    void theIdAnAddedUpSlurmJobIsShownWithIsNotSilentlyAnotherUsersJob() throws IOException {
        long t = Instant.parse("2026-03-02T10:00:00Z").toEpochMilli();
        long t2 = t + 65_000;
        Path dir = Files.createDirectories(state.resolve("accounting"));
        Files.writeString(dir.resolve("2026-03-02.log"),
                line(interval("slurm-job:4242@" + t, "alice", "4242", t, t + 60_000, 0, "GONE"))
                        + line(interval("slurm-job:4242@" + t2, "alice", "4242", t2, t2 + 60_000, 0, "GONE"))
                        + line(interval("f00d42-1", "bob", "slurm-job:4242", t, t + 600_000, 1, "RELEASED")));
        AccountingStore store = AccountingStore.at(state);
        Optional<AllocationUsage> shown = AllocationUsage.findJob(store, "4242");
        assertThat(shown.map(AllocationUsage::id)).as("precondition: report 4242 adds up alice's two tracks and"
                + " shows them as slurm-job:4242").contains("slurm-job:4242");
        AtomicReference<Optional<AllocationUsage>> back = new AtomicReference<>();
        Throwable refused = catchThrowable(() -> back.set(AllocationUsage.findJob(store, "slurm-job:4242")));
        assertThat(refused).as("report 4242 showed alice's Slurm job as \"slurm-job:4242\", an id the docs say report"
                + " and the REST API take back; bob's gpusched job is called \"slurm-job:4242\" too, so the id names"
                + " two things and must be refused naming them (JobRanAsSeveralException, as a job id that names"
                + " several is), not answered with one silently; findJob answered %s (owner %s), bob's allocation,"
                + " with nothing saying alice's job has that id",
                back.get() == null ? null : back.get().map(
                        AllocationUsage::id),
                back.get() == null ? null : back.get().flatMap(AllocationUsage::owner))
                .isInstanceOf(AllocationUsage.JobRanAsSeveralException.class);
    }
}
