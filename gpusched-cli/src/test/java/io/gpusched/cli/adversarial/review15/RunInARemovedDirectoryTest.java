package io.gpusched.cli.adversarial.review15;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.cli.GpuschedCommand;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review15: README's 126 (COMMAND_NOT_RUNNABLE) covers "the working directory cannot be entered as that user"; 127
 * (COMMAND_NOT_FOUND) "the command was not found, as a path or on the job's PATH". A local `gpusched run -- /bin/true`
 * from a working directory that was removed meanwhile (a shell still in it: `user.dir` names it) cannot start the job
 * there; /bin/true itself is found and executable. LocalRun maps every IOException of ProcessBuilder.start whose
 * message has "error=2," to COMMAND_NOT_FOUND (LocalRun.java:124-127), and chdir's ENOENT reads "error=2, No such file
 * or directory": it exits 127 and says the command cannot be started.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class RunInARemovedDirectoryTest {
    @TempDir
    Path dir;

    @Test
    void aRunWhoseWorkingDirectoryIsGoneIsNotCommandNotFound() throws Exception {
        Path gone = Files.createDirectory(dir.resolve("removed-cwd"));
        Files.delete(gone);
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        Map<String, String> env = new HashMap<>(System.getenv());
        env.remove("GPUSCHED_SOCKET");
        env.remove("CONTAINER_ID");
        String before = System.getProperty("user.dir");
        int exit;
        try {
            System.setProperty("user.dir", gone.toString()); // the shell's working directory, removed under it
            exit = GpuschedCommand.commandLine(new PrintStream(out, true, StandardCharsets.UTF_8),
                    new PrintStream(err, true, StandardCharsets.UTF_8), env).execute("--simulate", "dgx1-v100",
                            "--state-dir", dir.resolve("state").toString(), "run", "--no-isolation", "--gpu=1", "--",
                            "/bin/true");
        } finally {
            System.setProperty("user.dir", before);
        }
        String e = err.toString(StandardCharsets.UTF_8).strip();
        System.out.printf("review15 removed cwd: exit %d: %s%n", exit, e);
        assertThat(exit).as("`gpusched run -- /bin/true` in a removed working directory: %s", e).isNotEqualTo(127)
                .isEqualTo(126);
    }
}
