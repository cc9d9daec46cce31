package io.gpusched.cli.adversarial.review57;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord;
import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.RecordCodec;
import io.gpusched.cli.GpuschedCommand;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review 57. {@code gpusched report ID}, ID an allocation's id that is also a job id, prints a note naming the job's
 * allocations: at most 10, then {@code , ...} when there are more (review56). ReportCommand asks
 * {@code allocationsOfJob(store, id, 11)} and then drops ID itself from the answer: when the allocation shown also ran
 * as that job (its own job id is its id) and is among the 11 newest, 10 remain and the note names 10 allocations with
 * no {@code ...}, as if they were all, though 11 other allocations ran as the job.
 */
@Tag("adversarial")
class JobNoteCountsTheAllocationItselfTest {
    @TempDir
    Path state;

    record Result(int exit, String out, String err) {
    }

    private Result run(String... args) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        List<String> all = new ArrayList<>(List.of("--state-dir", state.toString(), "--simulate", "dgx1-v100"));
        all.addAll(List.of(args));
        int exit = GpuschedCommand.commandLine(new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8)).execute(all.toArray(String[]::new));
        return new Result(exit, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    @Test
    void theNoteSaysThereAreMoreThanTenWhenThereAre() {
        long ms = Instant.now().minusSeconds(7200).toEpochMilli();
        List<AccountingRecord> recs = new ArrayList<>();
        // 11 other allocations ran as job "train-7", oldest first; then allocation "train-7" (newest) ran as it too
        for (int i = 1; i <= 11; i++) {
            recs.add(interval("b" + i + "-1", "train-7", ms + i * 60_000L, 30_000));
        }
        recs.add(interval("train-7", "train-7", ms + 20 * 60_000L, 30_000));
        AccountingStore store = AccountingStore.at(state);
        try (AccountingStore.Writer w = store.openWriter().orElseThrow()) {
            w.append(recs);
        }
        Result r = run("report", "train-7");
        assertThat(r.exit()).as("the premise: allocation train-7 is shown: %s", r.err()).isZero();
        assertThat(r.err())
                .as("11 allocations other than train-7 ran as job \"train-7\" (b1-1 ... b11-1); the note names at most"
                        + " 10 and should say there are more (\", ...\"); it counted allocation train-7 itself among"
                        + " the 11 it asked for and names 10 as if they were all:%n%s", r.err())
                .contains("is also the job id of allocations")
                .contains(", ...");
    }

    private static AccountingRecord interval(String id, String job, long from, long held) {
        String json = "{\"k\":\"i\",\"id\":\"" + id + "\",\"owner\":\"alice\",\"job\":\"" + job + "\",\"from\":"
                + from + ",\"to\":" + (from + held) + ",\"first\":true,\"end\":\"RELEASED\",\"gpus\":[{\"i\":0,"
                + "\"uuid\":\"GPU-0\",\"held\":" + held + ",\"meas\":" + held + ",\"um\":" + held + ",\"us\":"
                + 50.0 * held + ",\"up\":50.0,\"idle\":0,\"e\":0,\"ee\":0,\"em\":0}]}";
        CRC32C c = new CRC32C();
        byte[] b = json.getBytes(StandardCharsets.UTF_8);
        c.update(b, 0, b.length);
        return RecordCodec.decode(String.format("%08x", c.getValue()) + " " + json);
    }
}
