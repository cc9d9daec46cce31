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
import java.util.zip.CRC32C;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Hostile {@code --state-dir}s given to the jar a user runs ({@code java -jar gpusched-cli/target/gpusched.jar}): a
 * symbolic link to a directory others may write, a FIFO or a directory in place of the ledger, a ledger of a newer
 * format, a FIFO in place of the lock file. Each must end the command with a non-zero exit code and one line
 * {@code gpusched: <REASON>: <message>} naming the path (README "The gpusched command"), without a stack trace, and
 * never hang (a child still running after 60 s is killed and the case fails: a hang detector, not a timing check).
 */
@Tag("adversarial")
class HostileStateDirFromTheJarIT {

    @TempDir
    Path tmp;

    private record Run(int exit, String out, String err) {
    }

    private static Run gpusched(Path stateDir, String... args) throws Exception {
        Path jar = Path.of("target", "gpusched.jar").toAbsolutePath();
        assertThat(jar).as("built by package").isRegularFile();
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-jar", jar.toString(), "--simulate", "pcie-4xa10", "--state-dir", stateDir.toString()));
        cmd.addAll(List.of(args));
        Path out = Files.createTempFile("gpusched-out", ".txt");
        Path err = Files.createTempFile("gpusched-err", ".txt");
        Process p = new ProcessBuilder(cmd).redirectOutput(out.toFile()).redirectError(err.toFile()).start();
        if (!p.waitFor(60, TimeUnit.SECONDS)) {
            p.destroyForcibly().waitFor();
            throw new AssertionError("gpusched " + String.join(" ", args) + " on " + stateDir + " still ran after 60"
                    + " s (killed); stdout: " + Files.readString(out) + " stderr: " + Files.readString(err));
        }
        return new Run(p.exitValue(), Files.readString(out, StandardCharsets.UTF_8),
                Files.readString(err, StandardCharsets.UTF_8));
    }

    private static void refusedInOneLine(Run r, String reason, Path named) {
        assertThat(r.exit()).as("exit code; stderr " + r.err()).isNotZero();
        List<String> lines = r.err().strip().lines().filter(l -> !l.isBlank()).toList();
        assertThat(lines).as("stderr is one line: " + r.err()).hasSize(1);
        assertThat(lines.get(0)).startsWith("gpusched: " + reason + ": ").contains(named.toString());
        assertThat(r.err()).doesNotContain("\tat ").doesNotContain("Exception:");
    }

    private static Path newLedger(Path dir) throws Exception {
        Run r = gpusched(dir, "allocate", "--gpu=1");
        assertThat(r.exit()).as("a first allocation on " + dir + ": " + r.err()).isZero();
        assertThat(dir.resolve("ledger")).isRegularFile();
        return dir;
    }

    private static void mkfifo(Path p) throws Exception {
        assumeTrue(new ProcessBuilder("mkfifo", "-m", "600", p.toString()).start().waitFor() == 0, "mkfifo");
    }

    @Test
    void aSymlinkToADirectoryOthersMayWriteIsRefused() throws Exception {
        Path open = Files.createDirectories(tmp.resolve("open"));
        Files.setPosixFilePermissions(open, PosixFilePermissions.fromString("rwxrwxrwx"));
        Path link = Files.createSymbolicLink(tmp.resolve("link"), open);
        refusedInOneLine(gpusched(link, "allocate", "--gpu=1"), "INSECURE_PERMISSIONS", link);
        assertThat(open.resolve("ledger")).doesNotExist();
    }

    @Test
    void aFifoOrADirectoryInPlaceOfTheLedgerIsRefused() throws Exception {
        Path fifo = Files.createDirectories(tmp.resolve("fifo"));
        Files.setPosixFilePermissions(fifo, PosixFilePermissions.fromString("rwx------"));
        mkfifo(fifo.resolve("ledger"));
        Run r = gpusched(fifo, "allocate", "--gpu=1");
        assertThat(r.exit()).isNotZero();
        assertThat(r.err().strip().lines().toList()).hasSize(1);
        assertThat(r.err()).startsWith("gpusched: ").contains(fifo.resolve("ledger").toString());

        Path dir = Files.createDirectories(tmp.resolve("dir"));
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwx------"));
        Files.createDirectories(dir.resolve("ledger"));
        r = gpusched(dir, "status");
        assertThat(r.exit()).isNotZero();
        assertThat(r.err().strip().lines().toList()).hasSize(1);
        assertThat(r.err()).startsWith("gpusched: ").contains(dir.resolve("ledger").toString());
    }

    @Test
    void aLedgerOfANewerFormatIsRefusedAndLeftAsItWas() throws Exception {
        Path dir = newLedger(tmp.resolve("newer"));
        Path f = dir.resolve("ledger");
        String text = Files.readString(f, StandardCharsets.UTF_8);
        String header = text.substring(0, text.indexOf('\n'));
        String[] h = header.split(" ");
        h[1] = Integer.toString(Integer.parseInt(h[1]) + 1);
        String body = String.join(" ", java.util.Arrays.copyOf(h, h.length - 1));
        CRC32C c = new CRC32C();
        c.update(body.getBytes(StandardCharsets.UTF_8));
        byte[] forged = (body + " " + String.format("%08x", c.getValue()) + text.substring(text.indexOf('\n')))
                .getBytes(StandardCharsets.UTF_8);
        Files.write(f, forged);
        refusedInOneLine(gpusched(dir, "allocate", "--gpu=1"), "NEWER_FORMAT", f);
        assertThat(Files.readAllBytes(f)).as("the newer ledger is not rewritten").isEqualTo(forged);
    }

    @Test
    void aFifoInPlaceOfTheLockFileIsRefused() throws Exception {
        Path dir = newLedger(tmp.resolve("lockfifo"));
        Files.delete(dir.resolve("ledger.lock"));
        mkfifo(dir.resolve("ledger.lock"));
        Run r = gpusched(dir, "allocate", "--gpu=1");
        assertThat(r.exit()).isNotZero();
        assertThat(r.err()).startsWith("gpusched: ").contains(dir.resolve("ledger.lock").toString());
    }
}
