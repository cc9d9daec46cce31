package io.gpusched.cli.adversarial.review16;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.cli.GpuschedCommand;
import io.gpusched.testing.LocalUsers;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review16: {@code gpusched run} started in a working directory its user may enter but not list (mode 0711 or 0311: a
 * drop box, another user's home with o=x). README: the job runs in the run's working directory ("the working
 * directory cannot be entered as that user" is 126). HotSpot's perf-data set-up ({@code -XX:+UsePerfData}, on by
 * default) changes into {@code /tmp/hsperfdata_<user>} and returns with {@code fchdir} to a descriptor of "."; that
 * open fails in a directory that cannot be read, so the JVM stays in {@code /tmp/hsperfdata_<user>} and
 * {@code user.dir} says so. RunCommand.java:92 takes {@code System.getProperty("user.dir")} as the job's cwd: the job
 * runs in the JVM's perf-data directory, exit 0, nothing said. The packaged launcher (deploy/debian/gpusched) starts
 * {@code java -jar} without {@code -XX:-UsePerfData}. By hand the same happens through the node service, as a real
 * user ({@code cd /srv/dropbox-0711 && gpusched run --gpu=1 -- pwd} prints {@code /tmp/hsperfdata_<user>}).
 * Here as root without CAP_DAC_OVERRIDE / CAP_DAC_READ_SEARCH (setpriv's bounding set), which reads a directory as its
 * owner does; the command is the real one in a child JVM with this test's class path.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class RunFromADirectoryItCannotListTest {
    @TempDir
    Path dir;

    @Test
    void theJobRunsInTheDirectoryTheRunWasStartedIn() throws Exception {
        assumeTrue(LocalUsers.available(), "needs root and setpriv");
        Path work = Files.createDirectories(dir.resolve("enter-only"));
        Path state = Files.createDirectories(dir.resolve("state"));
        Files.setPosixFilePermissions(work, PosixFilePermissions.fromString("-wx--x--x"));
        try {
            // a shell started the same way is in the directory, and cannot list it: the setting is what it should be
            LocalUsers.Result sh = LocalUsers.run(withoutDacCaps(List.of("sh", "-c",
                    "cd \"$0\" && pwd && if ls . >/dev/null 2>&1; then echo listable; else echo unlistable; fi",
                    work.toString())), 30);
            assertThat(sh.out()).as("the shell: " + sh.err()).isEqualTo(work + "\nunlistable\n");

            List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java")
                    .toString(), "-cp", System.getProperty("java.class.path"), GpuschedCommand.class.getName(),
                    "--simulate", "dgx1-v100", "--state-dir", state.toString(), "run", "--no-isolation", "--gpu=1",
                    "--", "pwd"));
            ProcessBuilder pb = new ProcessBuilder(withoutDacCaps(cmd)).directory(work.toFile());
            pb.environment().remove("GPUSCHED_SOCKET");
            pb.environment().remove("JAVA_TOOL_OPTIONS");
            Process p = pb.redirectErrorStream(false).start();
            p.getOutputStream().close();
            String err;
            String out;
            Path errFile = dir.resolve("err.txt");
            try (var e = p.getErrorStream()) {
                Thread t = new Thread(() -> {
                    try {
                        Files.write(errFile, e.readAllBytes());
                    } catch (Exception ignored) {
                        // the process went away
                    }
                });
                t.start();
                out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
                assertThat(p.waitFor(90, TimeUnit.SECONDS)).as("the run ended").isTrue();
                t.join(10_000);
                err = Files.exists(errFile) ? Files.readString(errFile) : "";
            }
            assertThat(p.exitValue() == 126 || out.strip().equals(work.toString()))
                    .as("`gpusched run -- pwd` started in %s (mode 0311) exited %d and printed %s (stderr %s)", work,
                            p.exitValue(), out.strip(), err.strip())
                    .isTrue();
        } finally {
            Files.setPosixFilePermissions(work, PosixFilePermissions.fromString("rwx------"));
        }
    }

    /** @return {@code cmd} started by setpriv without the capabilities that pass over file modes */
    private static List<String> withoutDacCaps(List<String> cmd) {
        List<String> out = new ArrayList<>(List.of("setpriv", "--bounding-set", "-dac_override,-dac_read_search",
                "--"));
        out.addAll(cmd);
        return out;
    }
}
