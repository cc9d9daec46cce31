package io.gpusched.cli.adversarial.statedir;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.cli.adversarial.JarRun;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Issue 36, rough edges: "Read-only commands write: `list` creates the state directory and the ledger". The fix made
 * {@code list} read-only (ListCommand: "README: read-only commands write nothing"), but the other commands that only
 * show the node (its link matrix, its gres.conf, its CDI spec) still create the state directory, {@code ledger},
 * {@code ledger.lock} and {@code node} in a directory they were only pointed at.
 */
@Tag("adversarial")
class ReadOnlyCommandsWriteNothingIT {
    @TempDir
    Path tmp;

    @ParameterizedTest
    @ValueSource(strings = {"list", "topo", "export cdi", "export slurm --cores none"})
    void aCommandThatOnlyShowsTheNodeCreatesNoStateDirectory(String command) throws Exception {
        Path state = tmp.resolve("fresh");
        List<String> args = new ArrayList<>(List.of("--simulate", "dgx1-v100", "--state-dir", state.toString()));
        args.addAll(List.of(command.split(" ")));
        JarRun.Result r = JarRun.run(tmp, args.toArray(String[]::new));
        assertThat(r.exit()).as(command + ": " + r.err()).isZero();
        assertThat(state).as("gpusched " + command + " created the state directory it was only pointed at")
                .doesNotExist();
    }
}
