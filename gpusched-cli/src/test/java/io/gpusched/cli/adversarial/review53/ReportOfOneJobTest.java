package io.gpusched.cli.adversarial.review53;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.cli.GpuschedCommand;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review 53: {@code gpusched report ID} after {@code gpusched demo}, as a user runs it.
 *
 * <ul>
 *   <li>The command's own help says {@code ID} is "one allocation (or job) to report on", and issue 34 asks for
 *       "{@code gpusched report ID} for one allocation or job (the jobstats/sacct view)"; the node service gives each
 *       job's allocation the job's id as its {@code jobId}. {@code AllocationUsage.find} matches allocation ids only,
 *       so {@code gpusched report train-resnet} (the demo's training job) answers "no usage is recorded for
 *       allocation" although the store holds its records.</li>
 *   <li>{@code --csv} (like {@code --since}, {@code --until}, {@code --by}) is silently ignored with an ID: the text
 *       view is printed with exit 0, so a script that asked for CSV parses a table. Bad input must be refused or
 *       honoured, not dropped.</li>
 * </ul>
 */
class ReportOfOneJobTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    static Path state;

    private static String allocationOfTheTrainingJob;

    record Result(int exit, String out, String err) {
    }

    static Result run(String... args) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        List<String> all = new ArrayList<>(List.of("--state-dir", state.toString(), "--simulate", "dgx1-v100"));
        all.addAll(List.of(args));
        int exit = GpuschedCommand.commandLine(new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8)).execute(all.toArray(String[]::new));
        return new Result(exit, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    @BeforeAll
    static void demo() throws Exception {
        Result demo = run("demo");
        assertThat(demo.exit()).as(demo.err()).isZero();
        JsonNode rows = JSON.readTree(run("report", "--by", "allocation", "--json").out()).get("rows");
        for (JsonNode r : rows) {
            if ("train-resnet".equals(r.get("job").asText())) {
                allocationOfTheTrainingJob = r.get("key").asText();
            }
        }
        assertThat(allocationOfTheTrainingJob).as("the demo recorded its training job: %s", rows).isNotNull();
    }

    @Test
    void reportOfAJobIdShowsThatJobsAllocation() {
        Result byAllocation = run("report", allocationOfTheTrainingJob);
        assertThat(byAllocation.exit()).as("the premise: report %s works: %s", allocationOfTheTrainingJob,
                byAllocation.err()).isZero();
        Result byJob = run("report", "train-resnet");
        assertThat(byJob.exit())
                .as("gpusched report train-resnet (ID: \"one allocation (or job) to report on\"): expected exit 0 and"
                        + " the job's allocation %s per GPU; got exit %d: %s", allocationOfTheTrainingJob,
                        byJob.exit(), byJob.err().strip())
                .isZero();
        assertThat(byJob.out()).contains("Allocation " + allocationOfTheTrainingJob).contains("job train-resnet");
    }

    @Test
    void csvWithAnIdIsHonouredOrRefusedNeverSilentlyDropped() {
        Result r = run("report", allocationOfTheTrainingJob, "--csv");
        boolean refused = r.exit() != 0 && r.err().contains("--csv");
        boolean csv = r.exit() == 0 && !r.out().startsWith("Allocation ") && r.out().lines().findFirst()
                .orElse("").contains(",");
        assertThat(refused || csv)
                .as("gpusched report %s --csv: expected CSV, or a refusal naming --csv; got exit %d and the text"
                        + " view:%n%s", allocationOfTheTrainingJob, r.exit(), r.out())
                .isTrue();
    }
}
