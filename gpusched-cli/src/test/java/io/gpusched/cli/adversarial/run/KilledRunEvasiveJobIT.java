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
import java.util.HexFormat;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 36 item 1 with a job that makes itself hard to end (cgroup2): its grandchild moves into a cgroup it makes
 * below the job cgroup, and the job cgroup is frozen ({@code cgroup.freeze}), before the run's JVM is killed with
 * SIGKILL. The next {@code allocate} of the same GPUs must still end the grandchild and remove the job cgroup (with
 * its child) before it succeeds. Root only; the parent cgroup has a random name and is removed afterwards.
 */
@Tag("adversarial")
class KilledRunEvasiveJobIT {
    private static final Pattern FENCED = Pattern.compile("gpusched: (\\S+) GPUs \\[.*\\] fenced in (\\S+)");

    @TempDir
    Path tmp;

    private static Path cgroup2() throws IOException {
        for (String line : Files.readAllLines(Path.of("/proc/self/mountinfo"))) {
            String[] halves = line.split(" - ", 2);
            if (halves.length == 2 && halves[1].startsWith("cgroup2 ")) {
                return Path.of(halves[0].split(" ")[4]);
            }
        }
        return null;
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

    @Test
    void aNestedFrozenGrandchildIsEndedBeforeItsGpusAreHandedOutAgain() throws Exception {
        assumeTrue(Files.readAllLines(Path.of("/proc/self/status")).stream()
                .anyMatch(l -> l.matches("Uid:\\s+0\\s.*")), "needs root (cgroups)");
        Path root = cgroup2();
        assumeTrue(root != null, "needs a cgroup2 mount");
        Path parent = root.resolve("gpusched-test-" + HexFormat.of().formatHex(new SecureRandom().generateSeed(4)));
        String state = tmp.resolve("state").toString();
        long grandchild = -1;
        Process run = JarRun.start(tmp, "--simulate", "dgx1-v100", "--state-dir", state, "run", "--gpu=8",
                "--cgroup-parent", parent.toString(), "--", "sh", "-c", "sleep 300 & echo GRANDCHILD=$!; wait");
        try {
            Path cgroup = null;
            StringBuilder seen = new StringBuilder();
            BufferedReader r = new BufferedReader(new InputStreamReader(run.getInputStream(), StandardCharsets.UTF_8));
            for (String line; grandchild < 0 && (line = r.readLine()) != null;) {
                seen.append(line).append('\n');
                Matcher m = FENCED.matcher(line);
                if (m.find()) {
                    cgroup = Path.of(m.group(2));
                } else if (line.startsWith("GRANDCHILD=")) {
                    grandchild = Long.parseLong(line.substring("GRANDCHILD=".length()).strip());
                }
            }
            assertThat(grandchild).as(seen.toString()).isPositive();
            assertThat(cgroup).as(seen.toString()).isNotNull();
            // what the job (root) may do to itself: a cgroup of its own below the job's, then freeze the job
            Path inner = Files.createDirectory(cgroup.resolve("inner"));
            Files.writeString(inner.resolve("cgroup.procs"), Long.toString(grandchild));
            Files.writeString(cgroup.resolve("cgroup.freeze"), "1");
            for (int i = 0; i < 600 && !Files.readString(cgroup.resolve("cgroup.events")).contains("frozen 1"); i++) {
                Thread.sleep(50);
            }
            assertThat(Files.readString(cgroup.resolve("cgroup.events"))).contains("frozen 1");

            run.destroyForcibly(); // SIGKILL to the run's JVM only
            assertThat(run.waitFor(30, TimeUnit.SECONDS)).isTrue();
            assertThat(running(grandchild)).as("the frozen grandchild outlives the run").isTrue();

            JarRun.Result next = JarRun.run(tmp, "--simulate", "dgx1-v100", "--state-dir", state, "allocate",
                    "--gpu=8");
            assertThat(next.exit()).as(next.err()).isZero();
            assertThat(running(grandchild)).as("pid %d of the killed run's job (nested, frozen) still runs while its"
                    + " GPUs were handed out again", grandchild).isFalse();
            assertThat(inner).doesNotExist();
            assertThat(cgroup).doesNotExist();
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
        if (Files.exists(dir.resolve("cgroup.freeze"))) {
            Files.writeString(dir.resolve("cgroup.freeze"), "0");
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
