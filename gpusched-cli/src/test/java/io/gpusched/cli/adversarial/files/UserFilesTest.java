package io.gpusched.cli.adversarial.files;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.cli.GpuschedCommand;
import java.io.ByteArrayOutputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 36 item 4: every file the command reads because a user named it ({@code --config}, {@code --simulate FILE},
 * {@code plan FILE}, {@code export slurm --check FILE}) is read as a regular file of at most 3 MiB: a FIFO, {@code
 * /dev/zero}, a directory, a binary file and a file over the limit each end at once (no hang, no OutOfMemoryError)
 * with exit 2 and one line naming the file and what would be valid.
 */
@Tag("adversarial")
class UserFilesTest {

    record Result(int exit, String out, String err) {
    }

    static Result gpusched(List<String> args) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int exit = GpuschedCommand.commandLine(new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8)).execute(args.toArray(String[]::new));
        return new Result(exit, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    /** Every reader, as a function of the file it is given. */
    static List<Function<Path, List<String>>> readers(Path state) {
        String s = state.toString();
        return List.of(
                f -> List.of("--state-dir", s, "--config", f.toString(), "--simulate", "pcie-4xa10", "list"),
                f -> List.of("--state-dir", s, "--simulate", f.toString(), "list"),
                f -> List.of("--state-dir", s, "--simulate", "pcie-4xa10", "plan", f.toString()),
                f -> List.of("--state-dir", s, "--simulate", "pcie-4xa10", "export", "slurm", "--cores", "none",
                        "--check", f.toString()));
    }

    private static void refusedPromptly(Path file, Path state, String why) {
        for (Function<Path, List<String>> reader : readers(state)) {
            List<String> args = reader.apply(file);
            Result r = assertTimeoutPreemptively(Duration.ofSeconds(60), () -> gpusched(args),
                    () -> "gpusched " + args + " did not end (" + why + ")");
            assertThat(r.exit()).as("%s: %s", args, r.err()).isEqualTo(2);
            assertThat(r.err().strip().lines()).as("%s: %s", args, r.err()).hasSize(1);
            assertThat(r.err()).as("%s", args).contains(file.getFileName().toString()).contains(why);
            assertThat(r.err()).as("no Java internals: %s", args).doesNotContain("Exception")
                    .doesNotContain("Input length");
        }
    }

    @Test
    void aFifoIsRefusedWithoutOpeningIt(@TempDir Path dir) throws Exception {
        Path fifo = dir.resolve("node.fifo");
        Process mk = new ProcessBuilder("mkfifo", fifo.toString()).start();
        assumeTrue(mk.waitFor() == 0, "mkfifo is not available");
        try {
            refusedPromptly(fifo, dir.resolve("state"), "not a regular file");
        } finally {
            // a reader stuck in open() (the defect) is released by a writer, so the JVM can go on
            Thread unblock = new Thread(() -> {
                try (OutputStream o = Files.newOutputStream(fifo)) {
                    o.write('\n');
                } catch (Exception ignored) {
                    // nobody was waiting
                }
            });
            unblock.setDaemon(true);
            unblock.start();
            unblock.join(200);
        }
    }

    @Test
    void devZeroIsRefusedWithoutReadingIt(@TempDir Path dir) {
        Path zero = Path.of("/dev/zero");
        assumeTrue(Files.exists(zero), "no /dev/zero");
        refusedPromptly(zero, dir.resolve("state"), "not a regular file");
    }

    @Test
    void aLinkToDevZeroIsRefusedToo(@TempDir Path dir) throws Exception {
        assumeTrue(Files.exists(Path.of("/dev/zero")), "no /dev/zero");
        Path link = Files.createSymbolicLink(dir.resolve("gres.conf"), Path.of("/dev/zero"));
        refusedPromptly(link, dir.resolve("state"), "not a regular file");
    }

    @Test
    void aDirectoryIsRefused(@TempDir Path dir) throws Exception {
        refusedPromptly(Files.createDirectory(dir.resolve("adir")), dir.resolve("state"), "a directory");
    }

    @Test
    void aMissingFileIsNamedAsMissing(@TempDir Path dir) {
        refusedPromptly(dir.resolve("absent.yaml"), dir.resolve("state"), "no such file");
    }

    @Test
    void aBinaryFileIsRefusedAsNotUtf8(@TempDir Path dir) throws Exception {
        Path bin = dir.resolve("binary.conf");
        Files.write(bin, new byte[]{'a', (byte) 0xff, (byte) 0xfe, 0, 1, 2, '\n'});
        refusedPromptly(bin, dir.resolve("state"), "not UTF-8");
    }

    @Test
    void aFileOverThreeMebibytesIsRefused(@TempDir Path dir) throws Exception {
        Path big = dir.resolve("big.yaml");
        byte[] line = "# padding padding padding padding padding padding padding padding padding padding\n"
                .getBytes(StandardCharsets.UTF_8);
        List<byte[]> parts = new ArrayList<>();
        long size = 0;
        while (size <= (3L << 20)) {
            parts.add(line);
            size += line.length;
        }
        try (OutputStream o = Files.newOutputStream(big)) {
            for (byte[] p : parts) {
                o.write(p);
            }
        }
        refusedPromptly(big, dir.resolve("state"), "expected at most 3145728");
    }
}
