package io.gpusched.cli.adversarial.run;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.cli.adversarial.JarRun;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.api.parallel.Execution;
import org.junit.jupiter.api.parallel.ExecutionMode;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Issue 36 item 1 as a user meets it, with the jar: {@code gpusched run --gpu=8 -- sh -c 'sleep 300 & ...'} fenced in
 * a real cgroup (cgroup2, and the v1 devices hierarchy, each where mounted), then {@code kill -9} of the run's JVM.
 * The parent-death signal reaches only the run's direct child, so the grandchild {@code sleep} keeps running; the
 * next {@code allocate --gpu=8} must not get the GPUs while it does: when it succeeds the grandchild is gone and the
 * job cgroup removed. While the run lives, {@code release} of its allocation is refused ({@code JOB_RUNNING}). Facts
 * come from /proc and cgroupfs, read here. Root only; cgroups and processes are the test's own (random names), removed
 * afterwards.
 */
@Tag("adversarial")
class KilledRunJobCgroupFromTheJarIT {
    @TempDir
    Path tmp;

    private static final Pattern FENCED = Pattern.compile("gpusched: (\\S+) GPUs \\[.*\\] fenced in (\\S+)");

    /** @return the cgroup roots: cgroup2 and the v1 devices hierarchy, as mounted */
    static Stream<Path> roots() throws IOException {
        List<Path> out = new ArrayList<>();
        for (String line : Files.readAllLines(Path.of("/proc/self/mountinfo"))) {
            String[] halves = line.split(" - ", 2);
            String[] after = halves.length < 2 ? new String[0] : halves[1].split(" ");
            if (after.length >= 3 && (after[0].equals("cgroup2") || (after[0].equals("cgroup")
                    && List.of(after[2].split(",")).contains("devices")))) {
                out.add(Path.of(halves[0].split(" ")[4]));
            }
        }
        return out.stream();
    }

    private static boolean root() throws IOException {
        return Files.readAllLines(Path.of("/proc/self/status")).stream().anyMatch(l -> l.matches("Uid:\\s+0\\s.*"));
    }

    private static boolean running(long pid) {
        try {
            String stat = Files.readString(Path.of("/proc", Long.toString(pid), "stat"), StandardCharsets.ISO_8859_1);
            char state = stat.substring(stat.lastIndexOf(')') + 1).trim().charAt(0);
            return state != 'Z' && state != 'X';
        } catch (IOException e) {
            return false;
        }
    }

    @ParameterizedTest
    @Execution(ExecutionMode.CONCURRENT)
    @MethodSource("roots")
    void aKilledRunsGrandchildIsEndedBeforeItsGpusAreHandedOutAgain(Path cgroupRoot) throws Exception {
        assumeTrue(root(), "needs root (cgroups)");
        Path parent = cgroupRoot.resolve("gpusched-test-" + HexFormat.of().formatHex(new SecureRandom()
                .generateSeed(4)));
        String state = tmp.resolve("state").toString();
        long grandchild = -1;
        Process run = JarRun.start(tmp, "--simulate", "dgx1-v100", "--state-dir", state, "run", "--gpu=8",
                "--cgroup-parent", parent.toString(), "--", "sh", "-c", "sleep 300 & echo GRANDCHILD=$!; wait");
        try {
            String id = null;
            Path cgroup = null;
            StringBuilder seen = new StringBuilder();
            BufferedReader r = new BufferedReader(new InputStreamReader(run.getInputStream(), StandardCharsets.UTF_8));
            for (String line; grandchild < 0 && (line = r.readLine()) != null;) {
                seen.append(line).append('\n');
                Matcher m = FENCED.matcher(line);
                if (m.find()) {
                    id = m.group(1);
                    cgroup = Path.of(m.group(2));
                } else if (line.startsWith("GRANDCHILD=")) {
                    grandchild = Long.parseLong(line.substring("GRANDCHILD=".length()).strip());
                }
            }
            assertThat(grandchild).as(seen.toString()).isPositive();
            assertThat(cgroup).as(seen.toString()).isNotNull().startsWith(parent);
            assertThat(Files.readString(cgroup.resolve("cgroup.procs"))).contains(Long.toString(grandchild));

            JarRun.Result release = JarRun.run(tmp, "--simulate", "dgx1-v100", "--state-dir", state, "release", id);
            JarRun.refusedInOneLine(release, "JOB_RUNNING", id);
            assertThat(running(grandchild)).isTrue();

            run.destroyForcibly(); // SIGKILL to the run's JVM only
            assertThat(run.waitFor(30, TimeUnit.SECONDS)).isTrue();
            assertThat(running(grandchild)).as("the grandchild outlives the run (no parent-death signal reaches it)")
                    .isTrue();

            JarRun.Result next = JarRun.run(tmp, "--simulate", "dgx1-v100", "--state-dir", state, "allocate",
                    "--gpu=8");
            assertThat(next.exit()).as(next.err()).isZero();
            assertThat(running(grandchild)).as("pid %d of the killed run's job still runs while its 8 GPUs were"
                    + " handed out again: %s", grandchild, next.err()).isFalse();
            assertThat(cgroup).as("the job cgroup (and its fence) is gone").doesNotExist();
        } finally {
            run.destroyForcibly();
            if (grandchild > 0 && running(grandchild)) {
                new ProcessBuilder("kill", "-9", Long.toString(grandchild)).start().waitFor();
            }
            removeTree(parent);
        }
    }

    private static void removeTree(Path dir) throws Exception {
        if (!Files.isDirectory(dir)) {
            return;
        }
        try (Stream<Path> children = Files.list(dir)) {
            for (Path c : children.filter(Files::isDirectory).toList()) {
                removeTree(c);
            }
        }
        for (int i = 0; i < 200 && Files.exists(dir); i++) {
            for (String pid : Files.readAllLines(dir.resolve("cgroup.procs"))) {
                if (!pid.isBlank()) {
                    new ProcessBuilder("kill", "-9", pid.strip()).start().waitFor();
                }
            }
            try {
                Files.delete(dir);
            } catch (IOException busy) {
                Thread.sleep(10);
            }
        }
    }
}
