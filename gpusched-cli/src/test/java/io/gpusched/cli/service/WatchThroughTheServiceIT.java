package io.gpusched.cli.service;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.cli.nodeservice.JarService;
import io.gpusched.testing.LedgerReader;
import io.gpusched.testing.LocalUsers;
import io.gpusched.testing.LocalUsers.User;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@code gpusched watch} through the node service, as users meet it: the service is the packaged jar's
 * {@code serve} (started as root, a child of the test), and two real users made here with {@code useradd} run the
 * jar under {@code setpriv}: alice watches ({@code watch --no-ansi}), bob allocates two GPUs and releases them. Alice's
 * frames show bob's allocation on its two GPUs once it is made and no more once it is released, as a watch on the
 * ledger directly shows its holders; what is live is read from the ledger's file ({@link LedgerReader}). Needs root,
 * useradd and setpriv (skipped, saying so, without them).
 */
@Timeout(value = 5, unit = TimeUnit.MINUTES)
class WatchThroughTheServiceIT {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String TITLE = "gpusched watch - ";
    /** A frame's lines after its title: the column heads and the simulated DGX-1's 8 GPUs. */
    private static final int ROWS = 9;

    private Path base;
    private Path state;
    private Path socket;
    private LocalUsers users;
    private JarService service;
    private Process watch;
    private final LinkedBlockingQueue<String> watchOut = new LinkedBlockingQueue<>();

    @BeforeEach
    void setUp() throws Exception {
        assumeTrue(LocalUsers.available(), "needs root, useradd and setpriv");
        base = Files.createTempDirectory(Path.of("/tmp"), "gpusched-watch-it");
        Files.setPosixFilePermissions(base, PosixFilePermissions.fromString("rwx--x--x"));
        state = base.resolve("state");
        socket = base.resolve("run").resolve("gpusched.sock");
        users = LocalUsers.create();
    }

    @AfterEach
    void tearDown() throws Exception {
        if (watch != null && watch.isAlive()) {
            watch.destroy();
            if (!watch.waitFor(60, TimeUnit.SECONDS)) {
                watch.destroyForcibly().waitFor(30, TimeUnit.SECONDS);
            }
        }
        if (service != null) {
            service.close();
        }
        if (users != null) {
            users.close();
        }
        if (base != null) {
            new ProcessBuilder("rm", "-rf", base.toString()).start().waitFor();
        }
    }

    private static Path jar() {
        assertThat(JarService.jar()).as("built by package").isRegularFile();
        return JarService.jar();
    }

    private static String java() {
        return JarService.java();
    }

    private static void pump(Process p, LinkedBlockingQueue<String> into) {
        Thread t = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(),
                    StandardCharsets.UTF_8))) {
                String line;
                while ((line = r.readLine()) != null) {
                    into.add(line);
                }
            } catch (IOException ignored) {
                // the process ended
            }
        });
        t.setDaemon(true);
        t.start();
    }

    private void startService() throws Exception {
        service = JarService.start(jar(), List.of(), List.of("--simulate", "dgx1-v100", "--state-dir",
                state.toString(), "serve", "--listen", "127.0.0.1:0", "--socket", socket.toString()));
        List<String> said = service.awaitServing();
        assertThat(JarService.serving(said)).as("the service's start; it said " + said).isTrue();
    }

    /** @return the command line that runs the jar with the service's socket (and a plain environment) */
    private List<String> gpusched(String... args) {
        List<String> cmd = new ArrayList<>(List.of("env", "GPUSCHED_SOCKET=" + socket, "HOME=/nonexistent", java(),
                "-XX:TieredStopAtLevel=1", "-jar", jar().toString()));
        cmd.addAll(List.of(args));
        return cmd;
    }

    /** The frames read so far: each its lines after the title. */
    private final List<List<String>> frames = new ArrayList<>();
    private final List<String> printed = new ArrayList<>();
    private List<String> current;

    /**
     * Reads the watch's output until a whole frame satisfies {@code wanted}, at most 90 s.
     *
     * @return that frame
     */
    private List<String> awaitFrame(String what, Predicate<List<String>> wanted) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
        while (System.nanoTime() < deadline) {
            String line = watchOut.poll(1, TimeUnit.SECONDS);
            if (line == null) {
                assertThat(watch.isAlive()).as("the watch runs; it printed " + printed).isTrue();
                continue;
            }
            printed.add(line);
            if (printed.size() > 40) {
                printed.remove(0);
            }
            if (line.startsWith(TITLE)) {
                current = new ArrayList<>();
            } else if (current != null) {
                current.add(line);
                if (current.size() == ROWS) {
                    frames.add(current);
                    if (wanted.test(current)) {
                        return current;
                    }
                }
            }
        }
        throw new AssertionError("no frame " + what + " within 90 s; the last: "
                + (frames.isEmpty() ? "none" : frames.get(frames.size() - 1)));
    }

    /** @return the GPU rows of a frame that name {@code id} as their holder */
    private static List<String> heldBy(List<String> frame, String id) {
        return frame.stream().filter(l -> l.strip().endsWith(" " + id)).toList();
    }

    @Test
    void aWatchThroughTheServiceShowsAnotherUsersAllocationComeAndGo() throws Exception {
        User alice = users.user("alice");
        User bob = users.user("bob");
        startService();

        List<String> cmd = new ArrayList<>(List.of("setpriv", "--reuid=" + alice.uid(), "--regid=" + alice.gid(),
                "--init-groups", "--"));
        cmd.addAll(gpusched("watch", "--no-ansi"));
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
        pb.environment().clear();
        pb.environment().put("PATH", "/usr/sbin:/usr/bin:/sbin:/bin");
        watch = pb.start();
        watch.getOutputStream().close();
        pump(watch, watchOut);
        List<String> first = awaitFrame("with the node's 8 GPUs", f -> true);
        assertThat(first.get(0)).contains("HELD BY");
        assertThat(first.subList(1, 9)).allSatisfy(row -> assertThat(row.strip()).endsWith(" -"));

        LocalUsers.Result made = LocalUsers.runAs(bob, gpusched("--json", "allocate", "--gpu=2"), 120);
        assertThat(made.exit()).as(made.err()).isZero();
        String id = JSON.readTree(made.out()).get("id").asText();
        assertThat(JSON.readTree(made.out()).get("owner").asText()).isEqualTo(bob.name());
        assertThat(LedgerReader.read(state).live).as("bob's allocation, in the ledger").containsKey(id);
        List<String> held = awaitFrame("showing bob's allocation " + id, f -> heldBy(f, id).size() == 2);
        assertThat(heldBy(held, id)).hasSize(2);

        LocalUsers.Result released = LocalUsers.runAs(bob, gpusched("release", id), 120);
        assertThat(released.exit()).as(released.err()).isZero();
        assertThat(LedgerReader.read(state).live).as("released, in the ledger").doesNotContainKey(id);
        List<String> after = awaitFrame("without " + id, f -> heldBy(f, id).isEmpty());
        assertThat(after.subList(1, 9)).allSatisfy(row -> assertThat(row.strip()).endsWith(" -"));
        assertThat(watch.isAlive()).as("the watch still runs").isTrue();
    }
}
