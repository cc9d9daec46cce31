package io.gpusched.cli.readme;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.cli.GpuschedCommand;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * README's "Planning a workflow": its command, on the sample workflow it links, prints the table README shows (the
 * sample is the file in examples/workflows, read as README names it).
 */
class ReadmePlanTest {

    @Test
    void theSampleWorkflowPlansAsReadmeShows(@TempDir Path state) throws Exception {
        String readme = Files.readString(Path.of("..", "README.md"), StandardCharsets.UTF_8);
        String section = readme.substring(readme.indexOf("### Planning a workflow"));
        int from = section.indexOf("```bash\n") + 8;
        String command = section.substring(from, section.indexOf("\n```", from));
        assertThat(command).isEqualTo("./gpusched --simulate dgx1-v100 plan examples/workflows/train-eval.yaml");
        int table = section.indexOf("```\nSTAGE") + 4;
        String shown = section.substring(table, section.indexOf("```", table));
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int exit = GpuschedCommand.commandLine(new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8)).execute("--simulate", "dgx1-v100", "--state-dir",
                        state.toString(), "plan", Path.of("..", "examples", "workflows", "train-eval.yaml").toString());
        assertThat(exit).as(err.toString(StandardCharsets.UTF_8)).isZero();
        assertThat(out.toString(StandardCharsets.UTF_8)).isEqualTo(shown);
    }
}
