package io.gpusched.cli.adversarial.statedir;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.cli.adversarial.JarRun;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.api.parallel.Execution;
import org.junit.jupiter.api.parallel.ExecutionMode;

/**
 * State directories that are not usable directories, given to the jar a user runs (issue 36, rough edges): an empty
 * name (it wrote into the working directory), a regular file, a FIFO, a dangling link (each a Java
 * {@code FileAlreadyExistsException}), a link to a directory others may write (refused only after {@code ledger.lock}
 * was created in it), a directory the user may not write ({@code AccessDeniedException}); and {@code list}, a read,
 * which created the state directory and the ledger. Each refusal is one line {@code gpusched: <REASON>: <message>}
 * naming the path, and nothing is created anywhere.
 */
@Tag("adversarial")
class StateDirShapesFromTheJarIT {
    @TempDir
    Path tmp;

    private JarRun.Result g(Path cwd, String stateDir, String... args) throws Exception {
        List<String> all = new ArrayList<>(List.of("--simulate", "pcie-4xa10", "--state-dir", stateDir));
        all.addAll(List.of(args));
        return JarRun.run(cwd, all.toArray(String[]::new));
    }

    private static List<Path> contents(Path dir) throws Exception {
        try (Stream<Path> s = Files.list(dir)) {
            return s.toList();
        }
    }

    @Test
    @Execution(ExecutionMode.CONCURRENT)
    void anEmptyStateDirectoryIsRefusedAndTheWorkingDirectoryLeftAlone() throws Exception {
        Path cwd = Files.createDirectory(tmp.resolve("cwd"));
        for (String cmd : new String[]{"allocate", "status", "list"}) {
            JarRun.Result r = g(cwd, "", cmd);
            JarRun.refusedInOneLine(r, "NOT_A_DIRECTORY", "empty name");
            assertThat(contents(cwd)).as(cmd + " wrote into the working directory").isEmpty();
        }
    }

    @Test
    @Execution(ExecutionMode.CONCURRENT)
    void aFileAFifoOrADanglingLinkIsNotADirectory() throws Exception {
        Path file = Files.writeString(tmp.resolve("file"), "x");
        Path dangling = Files.createSymbolicLink(tmp.resolve("dangling"), tmp.resolve("nowhere"));
        Path fifo = tmp.resolve("fifo");
        assumeTrue(new ProcessBuilder("mkfifo", fifo.toString()).start().waitFor() == 0, "mkfifo");
        for (Path p : List.of(file, fifo, dangling)) {
            JarRun.Result r = g(tmp, p.toString(), "allocate", "--gpu=1");
            JarRun.refusedInOneLine(r, "NOT_A_DIRECTORY", p.toString());
        }
        assertThat(tmp.resolve("nowhere")).doesNotExist();
        assertThat(Files.readString(file)).isEqualTo("x");
        JarRun.refusedInOneLine(g(tmp, file.resolve("sub").toString(), "allocate", "--gpu=1"), "NOT_A_DIRECTORY",
                file.toString());
    }

    @Test
    @Execution(ExecutionMode.CONCURRENT)
    void aLinkToADirectoryOthersMayWriteIsRefusedBeforeAnythingIsCreatedInIt() throws Exception {
        Path open = Files.createDirectory(tmp.resolve("open"));
        Files.setPosixFilePermissions(open, PosixFilePermissions.fromString("rwxrwxrwx"));
        Path link = Files.createSymbolicLink(tmp.resolve("link"), open);
        JarRun.refusedInOneLine(g(tmp, link.toString(), "allocate", "--gpu=1"), "INSECURE_PERMISSIONS",
                link.toString());
        assertThat(contents(open)).as("nothing created in the link's target").isEmpty();

        // a link to a safe directory is that directory (a host may name its state directory through a link)
        Path safe = Files.createDirectory(tmp.resolve("safe"));
        Files.setPosixFilePermissions(safe, PosixFilePermissions.fromString("rwxr-xr-x"));
        Path alias = Files.createSymbolicLink(tmp.resolve("alias"), safe);
        JarRun.Result r = g(tmp, alias.toString(), "allocate", "--gpu=1");
        assertThat(r.exit()).as(r.err()).isZero();
        assertThat(safe.resolve("ledger")).isRegularFile();
        assertThat(g(tmp, safe.toString(), "status").out()).contains("1 allocations");
    }

    @Test
    @Execution(ExecutionMode.CONCURRENT)
    void aDirectoryTheUserMayNotWriteIsPermissionDeniedNamingIt() throws Exception {
        boolean root = Files.readAllLines(Path.of("/proc/self/status")).stream()
                .anyMatch(l -> l.matches("Uid:\\s+0\\s.*"));
        assumeTrue(root && Files.isExecutable(Path.of("/usr/bin/setpriv")), "needs root and setpriv (runs as nobody)");
        Path base = Files.createTempDirectory(Path.of("/tmp"), "gpusched-denied");
        try {
            Files.setPosixFilePermissions(base, PosixFilePermissions.fromString("rwxr-xr-x"));
            Path closed = Files.createDirectory(base.resolve("closed"));
            Files.setPosixFilePermissions(closed, PosixFilePermissions.fromString("rwx------"));
            for (Path p : List.of(closed.resolve("sub"), base.resolve("rootdir"))) {
                if (p.getFileName().toString().equals("rootdir")) {
                    Files.createDirectory(p);
                }
                List<String> cmd = new ArrayList<>(List.of("setpriv", "--reuid=65534", "--regid=65534",
                        "--clear-groups"));
                cmd.addAll(JarRun.argv(List.of("--simulate", "pcie-4xa10", "--state-dir", p.toString(), "allocate",
                        "--gpu=1")));
                JarRun.Result r = JarRun.run(new ProcessBuilder(cmd).directory(Path.of("/tmp").toFile()));
                JarRun.refusedInOneLine(r, "PERMISSION_DENIED", p.toString());
                assertThat(r.err()).contains("uid 65534");
            }
            assertThat(contents(base.resolve("rootdir"))).isEmpty();
        } finally {
            new ProcessBuilder("rm", "-rf", base.toString()).start().waitFor();
        }
    }

    @Test
    @Execution(ExecutionMode.CONCURRENT)
    void listReadsWithoutCreatingTheStateDirectoryOrTheLedger() throws Exception {
        Path state = tmp.resolve("fresh");
        JarRun.Result r = g(tmp, state.toString(), "list");
        assertThat(r.exit()).as(r.err()).isZero();
        assertThat(r.out()).contains("4 GPUs");
        assertThat(state).doesNotExist();
        JarRun.Result json = g(tmp, state.toString(), "--json", "list");
        assertThat(json.exit()).as(json.err()).isZero();
        assertThat(state).doesNotExist();

        assertThat(g(tmp, state.toString(), "allocate", "--gpu=1").exit()).isZero();
        List<String> before = Files.readAllLines(state.resolve("ledger"));
        JarRun.Result held = g(tmp, state.toString(), "list");
        assertThat(held.out()).contains("-1"); // the holder's id ends in its sequence
        assertThat(Files.readAllLines(state.resolve("ledger"))).isEqualTo(before);
    }
}
