package io.gpusched.cli.adversarial.review56;

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
import java.util.List;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review 56. {@code gpusched report ID} takes "an allocation id, or a job id: the allocation the job ran as; a job that
 * ran as several is refused, naming them" (docs/ACCOUNTING.md, review53). A job id is any identifier the submitter
 * picks; nothing keeps it apart from allocation ids. When ID is both one allocation's id and the job id of another
 * allocation, ReportCommand looks the allocation up first ({@code find(...).or(ofJob)}) and prints it with exit 0, no
 * word of the job: alice asking for her job's usage is shown bob's allocation as if it were hers. Two records an ID
 * names are the very case the job lookup refuses and names them for; here one is dropped silently.
 */
@Tag("adversarial")
class JobIdThatIsAlsoAnAllocationIdTest {
    @TempDir
    Path state;

    record Result(int exit, String out, String err) {
    }

    private Result run(String... args) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        List<String> all = new java.util.ArrayList<>(List.of("--state-dir", state.toString(), "--simulate",
                "dgx1-v100"));
        all.addAll(List.of(args));
        int exit = GpuschedCommand.commandLine(new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8)).execute(all.toArray(String[]::new));
        return new Result(exit, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    @Test
    void anIdNamingAnAllocationAndAnotherAllocationsJobIsNotSilentlyTheFormer() {
        long ms = Instant.now().minusSeconds(3600).toEpochMilli();
        AccountingStore store = AccountingStore.at(state);
        try (AccountingStore.Writer w = store.openWriter().orElseThrow()) {
            // bob's allocation 7c1e0f2-3 (no job id) and alice's allocation 9d4b1a0-1, run as job "7c1e0f2-3"
            w.append(List.of(interval("7c1e0f2-3", "bob", null, ms, 600_000),
                    interval("9d4b1a0-1", "alice", "7c1e0f2-3", ms, 1_200_000)));
        }
        Result premise = run("report", "9d4b1a0-1");
        assertThat(premise.exit()).as("the premise: the store holds alice's allocation: %s", premise.err()).isZero();
        Result r = run("report", "7c1e0f2-3");
        assertThat(r.out() + r.err())
                .as("gpusched report 7c1e0f2-3: that id is bob's allocation and also alice's job (it ran as"
                        + " 9d4b1a0-1); expected a refusal naming both (as for a job that ran as several"
                        + " allocations) or at least a word of the job's allocation 9d4b1a0-1; got exit %d and only"
                        + " bob's allocation:%n%s%s", r.exit(), r.out(), r.err())
                .contains("9d4b1a0-1");
    }

    private static AccountingRecord interval(String id, String owner, String job, long from, long held) {
        String json = "{\"k\":\"i\",\"id\":\"" + id + "\",\"owner\":\"" + owner + "\","
                + (job == null ? "" : "\"job\":\"" + job + "\",") + "\"from\":" + from + ",\"to\":" + (from + held)
                + ",\"first\":true,\"end\":\"RELEASED\",\"gpus\":[{\"i\":0,\"uuid\":\"GPU-0\",\"held\":" + held
                + ",\"meas\":" + held + ",\"um\":" + held + ",\"us\":" + 50.0 * held + ",\"up\":50.0,\"idle\":0,"
                + "\"e\":0,\"ee\":0,\"em\":0}]}";
        CRC32C c = new CRC32C();
        byte[] b = json.getBytes(StandardCharsets.UTF_8);
        c.update(b, 0, b.length);
        return RecordCodec.decode(String.format("%08x", c.getValue()) + " " + json);
    }
}
