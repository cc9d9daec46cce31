package io.gpusched.cli.adversarial.statedir;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * A state directory of another user, through the jar a user runs: root's ledger used by {@code nobody} (run through
 * {@code setpriv}), and root given a ledger or a directory that another user owns. Each is one line
 * {@code gpusched: <REASON>: <message>} naming the path, a non-zero exit code, no stack trace, and the ledger's bytes
 * as they were. Needs root and setpriv; the jar and its lib/ must be readable by nobody (they are under the
 * repository's target/, 0755 up to /).
 */
@Tag("adversarial")
class OtherUserStateDirFromTheJarIT {

    private Path base;

    @AfterEach
    void cleanUp() throws Exception {
        if (base != null) {
            new ProcessBuilder("rm", "-rf", base.toString()).start().waitFor();
        }
    }

    private record Run(int exit, String err) {
    }

    private static Run gpusched(boolean asNobody, Path stateDir, String... args) throws Exception {
        Path jar = Path.of("target", "gpusched.jar").toAbsolutePath();
        assertThat(jar).as("built by package").isRegularFile();
        List<String> cmd = new ArrayList<>();
        if (asNobody) {
            cmd.addAll(List.of("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"));
        }
        cmd.addAll(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(), "-jar", jar.toString(),
                "--simulate", "pcie-4xa10", "--state-dir", stateDir.toString()));
        cmd.addAll(List.of(args));
        Process p = new ProcessBuilder(cmd).directory(Path.of("/tmp").toFile())
                .redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
        String err = new String(p.getErrorStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(60, TimeUnit.SECONDS)) {
            p.destroyForcibly().waitFor();
            throw new AssertionError("gpusched " + String.join(" ", args) + " still ran after 60 s");
        }
        return new Run(p.exitValue(), err);
    }

    private static void oneLine(Run r, String named) {
        assertThat(r.exit()).as("exit code; stderr " + r.err()).isNotZero();
        List<String> lines = r.err().strip().lines().filter(l -> !l.isBlank()).toList();
        assertThat(lines).as("one line: " + r.err()).hasSize(1);
        assertThat(lines.get(0)).startsWith("gpusched: ").contains(named);
        assertThat(r.err()).doesNotContain("\tat ");
    }

    private static void chown(String owner, Path p) throws Exception {
        assertThat(new ProcessBuilder("chown", owner, p.toString()).start().waitFor()).isZero();
    }

    @Test
    void anotherUsersStateDirectoryIsRefusedInOneLineAndLeftAsItWas() throws Exception {
        assumeTrue(Files.readAllLines(Path.of("/proc/self/status")).stream().anyMatch(l -> l.matches("Uid:\\s+0\\s.*")),
                "needs root (chown, setpriv)");
        assumeTrue(Files.isExecutable(Path.of("/usr/bin/setpriv")) || Files.isExecutable(Path.of("/bin/setpriv")),
                "needs setpriv (util-linux)");
        base = Files.createTempDirectory(Path.of("/tmp"), "gpusched-other-user");
        Files.setPosixFilePermissions(base, PosixFilePermissions.fromString("rwxr-xr-x"));
        Path state = base.resolve("state");
        assertThat(gpusched(false, state, "allocate", "--gpu=1").exit()).as("root's first allocation").isZero();
        Path ledger = state.resolve("ledger");
        byte[] before = Files.readAllBytes(ledger);

        // nobody, not allowed to write root's 0755 directory: a change is refused in one line, nothing written
        Run r = gpusched(true, state, "allocate", "--gpu=1");
        oneLine(r, state.toString());
        assertThat(Files.readAllBytes(ledger)).isEqualTo(before);

        // root, given a ledger another user owns: the writer's owner rule
        chown("4242", ledger);
        r = gpusched(false, state, "allocate", "--gpu=1");
        oneLine(r, ledger.toString());
        assertThat(r.err()).contains("INSECURE_PERMISSIONS").contains("4242");
        assertThat(Files.readAllBytes(ledger)).isEqualTo(before);
        chown("0", ledger);

        // root, given a directory another user owns
        chown("4242", state);
        r = gpusched(false, state, "allocate", "--gpu=1");
        oneLine(r, state.toString());
        assertThat(r.err()).contains("INSECURE_PERMISSIONS");
        assertThat(Files.readAllBytes(ledger)).isEqualTo(before);
    }
}
