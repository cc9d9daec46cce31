package io.gpusched.cli.adversarial.review65;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.cli.GpuschedCommand;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review 65. docs/ACCOUNTING.md, "Pods and Slurm jobs in the store": {@code gpu.accounting.attribution} takes
 * {@code [slurm]}, {@code [kubernetes]} or both. {@code gpusched serve} refuses a source it does not know, naming the
 * setting and the valid ones (ServeAttributionTest). {@code gpusched run}, the node's sampler when no console or
 * service runs, loads the same settings in {@code RunSampler.start}, which catches every {@code RuntimeException} and
 * logs it at debug level: an admin's typo ({@code [slrum]}, {@code [lsf]}) or a mapping where a list is meant makes
 * {@code run} exit 0, say nothing, and meter nothing at all, not even its own allocation (no accounting store is
 * written).
 */
class RunWithABadAttributionSettingTest {
    @TempDir
    Path dir;

    record Result(int exit, String out, String err) {
    }

    private Result gpusched(String... args) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        List<String> all = new ArrayList<>(List.of("--state-dir", dir.resolve("state").toString()));
        all.addAll(List.of(args));
        int exit = GpuschedCommand.commandLine(new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8)).execute(all.toArray(String[]::new));
        return new Result(exit, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    @Test
    void anUnknownSourceIsRefusedByRunAsByServe() throws Exception {
        Path bad = Files.writeString(dir.resolve("bad.yaml"), "gpu:\n  accounting:\n    attribution: [lsf]\n");
        Result r = gpusched("--simulate", "pcie-4xa10", "--config", bad.toString(), "run", "--no-isolation", "--",
                "true");
        assertThat(r.err()).as("gpusched run --config with gpu.accounting.attribution: [lsf] must refuse it with an"
                + " error naming the setting and the valid sources, as serve does; it ran (exit %d), metered nothing"
                + " (store written: %s) and said nothing", r.exit(),
                Files.exists(dir.resolve("state").resolve("accounting")))
                .contains("gpu.accounting.attribution lists \"lsf\"; valid: slurm, kubernetes");
        assertThat(r.exit()).as("a setting refused is an error, not a run").isNotZero();
    }

    @Test
    void aMappingWhereAListIsMeantIsRefusedByRun() throws Exception {
        Path bad = Files.writeString(dir.resolve("bad.yaml"),
                "gpu:\n  accounting:\n    attribution:\n      slurm: true\n");
        Result r = gpusched("--simulate", "pcie-4xa10", "--config", bad.toString(), "run", "--no-isolation", "--",
                "true");
        assertThat(r.err()).as("gpusched run --config with gpu.accounting.attribution given as a mapping must refuse"
                + " it naming the setting; it ran (exit %d) and said nothing", r.exit())
                .contains("gpu.accounting.attribution");
        assertThat(r.exit()).as("a setting refused is an error, not a run").isNotZero();
    }
}
