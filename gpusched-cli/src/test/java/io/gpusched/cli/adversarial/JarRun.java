package io.gpusched.cli.adversarial;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The command as a user runs it: {@code java -jar gpusched-cli/target/gpusched.jar ...} in a child process (built by
 * {@code package}), with a hang detector (a command still running after 60 s is killed and the test fails; not a
 * timing check). The JVM runs with C1 only, the serial collector and the class-data archive (as
 * SlurmCommandsFromTheJarIT, ExitCodesFromTheJarIT and OneNodeEveryMemberIT run theirs): a command lives a second or
 * two on a 2-core machine and never reaches C2; nothing the command does depends on them.
 */
public final class JarRun {
    /** What a finished command left: exit code, stdout, stderr. */
    public record Result(int exit, String out, String err) {
        /** @return stderr's non-blank lines */
        public List<String> errLines() {
            return err.strip().lines().filter(l -> !l.isBlank()).toList();
        }
    }

    private JarRun() {
    }

    /** @return the argv that starts the packaged jar with {@code args} */
    public static List<String> argv(List<String> args) {
        Path jar = Path.of("target", "gpusched.jar").toAbsolutePath();
        assertThat(jar).as("built by package").isRegularFile();
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto", "-jar", jar.toString()));
        cmd.addAll(args);
        return cmd;
    }

    /** Runs the jar with {@code args} in {@code dir} and waits for it. */
    public static Result run(Path dir, String... args) throws Exception {
        return run(new ProcessBuilder(argv(List.of(args))).directory(dir.toFile()));
    }

    /** Runs {@code pb} (its argv from {@link #argv}, possibly wrapped) and waits for it. */
    public static Result run(ProcessBuilder pb) throws Exception {
        Path out = Files.createTempFile("gpusched-out", ".txt");
        Path err = Files.createTempFile("gpusched-err", ".txt");
        try {
            Process p = pb.redirectOutput(out.toFile()).redirectError(err.toFile()).start();
            if (!p.waitFor(60, TimeUnit.SECONDS)) {
                p.destroyForcibly().waitFor();
                throw new AssertionError(String.join(" ", pb.command()) + " still ran after 60 s (killed); stdout: "
                        + Files.readString(out) + " stderr: " + Files.readString(err));
            }
            return new Result(p.exitValue(), Files.readString(out, StandardCharsets.UTF_8),
                    Files.readString(err, StandardCharsets.UTF_8));
        } finally {
            Files.deleteIfExists(out);
            Files.deleteIfExists(err);
        }
    }

    /** Starts the jar with {@code args}, stdout and stderr merged into the returned process's input stream. */
    public static Process start(Path dir, String... args) throws IOException {
        return new ProcessBuilder(argv(List.of(args))).directory(dir.toFile()).redirectErrorStream(true).start();
    }

    /** Asserts a refusal: non-zero exit, stderr one line {@code gpusched: <reason>: ...} naming {@code named}. */
    public static void refusedInOneLine(Result r, String reason, String named) {
        assertThat(r.exit()).as("exit code; stderr " + r.err()).isNotZero();
        assertThat(r.errLines()).as("stderr is one line: " + r.err()).hasSize(1);
        assertThat(r.errLines().get(0)).startsWith("gpusched: " + reason + ": ").contains(named);
        assertThat(r.err()).doesNotContain("\tat ").doesNotContain("Exception");
    }
}
