package io.gpusched.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code gpusched --simulate dgx1-v100 report} after the demo shows the hour of scripted usage the demo replayed,
 * through the command as a user runs it: per owner, per allocation with a verdict, JSON and CSV; bad input refused.
 */
class ReportCommandTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @Test
    void reportAfterTheDemoShowsTheScriptedFigures(@TempDir Path state) throws Exception {
        CliRunner cli = new CliRunner(state);
        CliRunner.Result demo = cli.run("--simulate", "dgx1-v100", "demo");
        assertThat(demo.exit()).as(demo.err()).isZero();
        assertThat(demo.out()).contains("Accounting: replayed the last hour").contains("idle policy: flagged");

        CliRunner.Result text = cli.run("--simulate", "dgx1-v100", "report");
        assertThat(text.exit()).as(text.err()).isZero();
        assertThat(text.out()).contains("alice").contains("bob").contains("carol (idle)").contains("dave")
                .contains("erin").contains("total");

        JsonNode byAlloc = JSON.readTree(cli.run("--simulate", "dgx1-v100", "report", "--by", "allocation",
                "--json").out());
        Map<String, JsonNode> byOwner = new HashMap<>();
        byAlloc.get("rows").forEach(r -> byOwner.put(r.get("owner").asText(), r));
        assertThat(byOwner.keySet()).contains("alice", "bob", "carol", "dave", "erin");
        // alice: two GPUs for 50 minutes of the training preset; carol: one GPU idle the whole hour
        assertThat(byOwner.get("alice").get("gpuSeconds").asDouble()).isEqualTo(2 * 50 * 60.0);
        assertThat(byOwner.get("alice").get("meanUtilization").asDouble()).isGreaterThan(85);
        assertThat(byOwner.get("carol").get("idleFraction").asDouble()).isEqualTo(1.0);
        // dave and erin share one GPU: each is charged its own process (40/32 % and 10/8 % alternating), never the
        // device's sum copied to both
        assertThat(byOwner.get("dave").get("meanUtilization").asDouble()).isCloseTo(36.0, within(0.5));
        assertThat(byOwner.get("erin").get("meanUtilization").asDouble()).isCloseTo(9.0, within(0.5));
        assertThat(byOwner.get("dave").get("energyEstimated").asBoolean()).isTrue();
        assertThat(byOwner.get("alice").get("energyEstimated").asBoolean()).as("V100 energy counter").isFalse();

        String carol = byOwner.get("carol").get("key").asText();
        CliRunner.Result one = cli.run("--simulate", "dgx1-v100", "report", carol);
        assertThat(one.exit()).as(one.err()).isZero();
        assertThat(one.out()).contains("owner carol").contains("GPU ").contains("idle flagged")
                .contains("1 GPU, 1.00 GPU-hours, 0 % mean utilization, idle 100 % of the time");

        CliRunner.Result csv = cli.run("--simulate", "dgx1-v100", "report", "--by", "day", "--csv");
        assertThat(csv.out().lines().findFirst().orElseThrow()).startsWith("day,allocations,gpu_hours,kwh");

        CliRunner.Result bad = cli.run("--simulate", "dgx1-v100", "report", "--since", "\u0663d");
        assertThat(bad.exit()).isEqualTo(2);
        assertThat(bad.err()).contains("--since").contains("is not a time");
        assertThat(cli.run("--simulate", "dgx1-v100", "report", "--by", "planet").err()).contains("owner,"
                + " allocation, device, day, pod, slurm-job");
        CliRunner.Result none = cli.run("--simulate", "dgx1-v100", "report", "no-such-allocation");
        assertThat(none.exit()).isEqualTo(1);
        assertThat(none.err()).contains("no usage is recorded for allocation \"no-such-allocation\"");
    }

    /** The README's accounting lines, run as pasted ({@code <ID>}: an allocation the demo recorded). */
    @Test
    void readmeAccountingLinesRunAsPasted(@TempDir Path state) throws Exception {
        String readme = Files.readString(Path.of("../README.md"));
        int sec = readme.indexOf("## Accounting: what each allocation used");
        assertThat(sec).as("README section").isPositive();
        int start = readme.indexOf("```bash\n", sec) + 8;
        List<String> lines = readme.substring(start, readme.indexOf("```", start)).lines()
                .map(l -> l.contains("#") ? l.substring(0, l.indexOf('#')) : l).map(String::strip)
                .filter(l -> !l.isEmpty()).toList();
        assertThat(lines).hasSizeGreaterThanOrEqualTo(4);
        CliRunner cli = new CliRunner(state);
        String id = null;
        for (String line : lines) {
            assertThat(line).startsWith("./gpusched ");
            if (line.contains("<ID>")) {
                if (id == null) {
                    id = JSON.readTree(cli.run("--simulate", "dgx1-v100", "report", "--by", "allocation", "--json")
                            .out()).get("rows").get(0).get("key").asText();
                }
                line = line.replace("<ID>", id);
            }
            CliRunner.Result r = cli.run(line.substring("./gpusched ".length()).split("\\s+"));
            assertThat(r.exit()).as(line + "\n" + r.out() + r.err()).isZero();
            if (line.endsWith(id == null ? "\u0000" : id)) {
                assertThat(r.out()).contains("GPU-hours").contains("% of the time");
            }
        }
    }
}
