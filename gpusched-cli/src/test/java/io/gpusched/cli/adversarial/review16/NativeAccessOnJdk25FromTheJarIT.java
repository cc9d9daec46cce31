package io.gpusched.cli.adversarial.review16;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.cli.adversarial.JarRun;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review16: issue 35 item 2, "JDK 25 as well as 17". CI runs the modules' unit tests on JDK 25 (.ci/run), never the
 * command a user runs: {@code java -jar gpusched.jar}, which both launchers exec (deploy/debian/gpusched picks any
 * Java 17 or later under /usr/lib/jvm; ./gpusched the java on PATH). On JDK 24 and later (JEP 472) JNA's
 * {@code System.load} prints four {@code WARNING:} lines on standard error ("A restricted method in java.lang.System
 * has been called ... Restricted methods will be blocked in a future release unless native access is enabled")
 * in every command that loads JNA: NVML's probe (any command without --simulate: list, status, doctor, ...), the
 * fence (run as root), the self-test. README: an error is "one line, {@code gpusched: <REASON>: <message>}". The jar's
 * manifest has no {@code Enable-Native-Access: ALL-UNNAMED} (honoured by {@code java -jar} from JDK 22, ignored by
 * 17), and the launchers pass no {@code --enable-native-access}.
 */
@Tag("adversarial")
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class NativeAccessOnJdk25FromTheJarIT {
    static final Path JDK25 = Path.of("/usr/lib/jvm/temurin-25-jdk-amd64/bin/java");

    @TempDir
    Path dir;

    private static JarRun.Result onJdk25(Path cwd, String... args) throws Exception {
        List<String> argv = new ArrayList<>(JarRun.argv(List.of(args)));
        argv.set(0, JDK25.toString());
        ProcessBuilder pb = new ProcessBuilder(argv).directory(cwd.toFile());
        pb.environment().remove("GPUSCHED_SOCKET");
        pb.environment().remove("JAVA_TOOL_OPTIONS");
        pb.environment().remove("JDK_JAVA_OPTIONS");
        return JarRun.run(pb);
    }

    @Test
    void theCommandOnJdk25SaysOnlyWhatItSays() throws Exception {
        assumeTrue(Files.isExecutable(JDK25), "needs JDK 25 at " + JDK25 + " (CI's second JDK)");
        List<String> problems = new ArrayList<>();
        // a node without GPUs (here): the refusal should be README's one line
        JarRun.Result list = onJdk25(dir, "--state-dir", dir.resolve("state").toString(), "list");
        if (list.errLines().size() != 1 || list.err().contains("WARNING: A restricted method")) {
            problems.add("`gpusched list` on a host without GPUs (exit " + list.exit() + ") wrote "
                    + list.errLines().size() + " lines on stderr: " + list.err().strip());
        }
        // a simulated node: doctor probes the host's providers too
        JarRun.Result doctor = onJdk25(dir, "--simulate", "dgx1-v100", "doctor");
        if (doctor.err().contains("WARNING: A restricted method")) {
            problems.add("`gpusched --simulate dgx1-v100 doctor` (exit " + doctor.exit() + ") wrote on stderr: "
                    + doctor.err().strip());
        }
        assertThat(problems).as("the jar on JDK 25").isEmpty();
    }
}
