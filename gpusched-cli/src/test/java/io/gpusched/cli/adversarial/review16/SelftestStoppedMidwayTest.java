package io.gpusched.cli.adversarial.review16;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.cli.GpuschedCommand;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review16: README, selftest: "It changes nothing on the host"; the issue: "changes nothing on the host it does not
 * restore". A self-test stopped while it runs (Ctrl-C, or SIGTERM as here: the JVM runs its shutdown hooks for both)
 * leaves what it made: its work directory {@code $TMPDIR/gpusched-selftest-*} with the fence check's device nodes
 * ({@code mknod -m 666}: {@code fence/dev/nvidia0}, {@code nvidia1}, {@code nvidiactl}, NVIDIA's major 195, which
 * open the real GPUs on a GPU node whose /tmp allows devices), and, when stopped during the fence, a
 * {@code gpusched-selftest-*} cgroup (with a {@code gpusched-probe-*} child) at the host's cgroup root. The clean-up
 * is only in {@code finally} blocks (SelftestCommand.call's deleteTree, Selftest.fence's deleteIfExists), which a
 * signal's exit does not run; there is no shutdown hook.
 */
@Tag("adversarial")
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class SelftestStoppedMidwayTest {
    @TempDir
    Path dir;

    private static Path cgroupRoot() {
        Path unified = Path.of("/sys/fs/cgroup/unified");
        return Files.isRegularFile(unified.resolve("cgroup.procs")) ? unified : Path.of("/sys/fs/cgroup");
    }

    private static Set<Path> selftestCgroups(Path root) throws IOException {
        try (Stream<Path> s = Files.list(root)) {
            return new TreeSet<>(s.filter(p -> p.getFileName().toString().startsWith("gpusched-selftest-")).toList());
        }
    }

    private static List<Path> workDirs(Path tmp) throws IOException {
        try (Stream<Path> s = Files.list(tmp)) {
            return s.filter(p -> p.getFileName().toString().startsWith("gpusched-selftest-")).toList();
        }
    }

    @Test
    void aSelftestStoppedDuringItsChecksLeavesNothingBehind() throws Exception {
        assumeTrue(Files.readAllLines(Path.of("/proc/self/status")).stream().filter(l -> l.startsWith("Uid:"))
                .anyMatch(l -> l.split("\\s+")[2].equals("0")), "needs root (the fence check)");
        Path root = cgroupRoot();
        assumeTrue(Files.isRegularFile(root.resolve("cgroup.procs")) && Files.isWritable(root), "needs cgroup2");
        Path tmp = Files.createDirectories(dir.resolve("tmp"));
        Set<Path> before = selftestCgroups(root);
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-Djava.io.tmpdir=" + tmp, "-cp", System.getProperty("java.class.path"),
                GpuschedCommand.class.getName(), "--simulate", "dgx1-v100", "--state-dir",
                dir.resolve("state").toString(), "selftest"));
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true)
                .redirectOutput(dir.resolve("selftest.log").toFile());
        pb.environment().remove("GPUSCHED_SOCKET");
        Process p = pb.start();
        Set<Path> left = new TreeSet<>();
        try {
            // midway: its fence check has made its device nodes (its own java.io.tmpdir: no other test's)
            boolean midway = false;
            for (int i = 0; i < 60_000 && p.isAlive() && !midway; i++) {
                midway = workDirs(tmp).stream().anyMatch(w -> Files.exists(w.resolve("fence/dev/nvidia1")));
                if (!midway) {
                    Thread.sleep(1);
                }
            }
            assertThat(midway && p.isAlive()).as("the self-test was seen midway, still running: "
                    + Files.readString(dir.resolve("selftest.log"))).isTrue();
            p.destroy(); // SIGTERM, as systemd or a terminal's Ctrl-C (SIGINT) would stop it
            assertThat(p.waitFor(60, TimeUnit.SECONDS)).as("the self-test ended on SIGTERM").isTrue();
            for (Path w : workDirs(tmp)) {
                try (Stream<Path> s = Files.walk(w)) {
                    s.forEach(f -> left.add(Path.of(tmp.relativize(f).toString())));
                }
            }
            // a self-test cgroup made since it started is its own when it is still there once every other
            // self-test (another test class's, in the other test JVM) has had 20 s to remove its own
            Set<Path> made = selftestCgroups(root);
            made.removeAll(before);
            for (int i = 0; i < 200 && !made.isEmpty(); i++) {
                made.retainAll(selftestCgroups(root));
                Thread.sleep(100);
            }
            left.addAll(made);
            assertThat(left).as("what the self-test stopped by SIGTERM (exit %d) left behind", p.exitValue())
                    .isEmpty();
        } finally {
            if (p.isAlive()) {
                p.destroyForcibly().waitFor();
            }
            for (Path c : left) {
                if (!c.startsWith(root)) {
                    continue;
                }
                try (Stream<Path> s = Files.walk(c)) {
                    for (Path d : s.filter(Files::isDirectory).sorted(Comparator.reverseOrder()).toList()) {
                        Files.deleteIfExists(d);
                    }
                } catch (IOException ignored) {
                    // a cgroup still in use: left for a person, named by the failure above
                }
            }
        }
    }
}
