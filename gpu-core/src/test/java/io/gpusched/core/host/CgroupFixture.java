package io.gpusched.core.host;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

/**
 * Real cgroups for tests (root only): the hierarchies this host mounts, a parent cgroup of the test's own under each
 * (a random suffix, removed with every process in it afterwards, as other helpers' tests run on the same machine), jobs
 * started inside a cgroup with a grandchild, and the v1 freezer, which keeps a process from dying of SIGKILL until
 * thawed. Facts are read from /proc and cgroupfs here, not through {@link JobCgroups}.
 */
public final class CgroupFixture implements AutoCloseable {
    /** One mounted hierarchy: cgroup2, or a v1 one. */
    public record Hierarchy(String name, Path root) {
        @Override
        public String toString() {
            return name;
        }
    }

    private final List<Path> made = new ArrayList<>();
    private final List<Process> started = new ArrayList<>();

    /** @return the hierarchies a job cgroup can be made in here: cgroup2 and the v1 devices hierarchy, as mounted */
    public static List<Hierarchy> hierarchies() {
        List<Hierarchy> out = new ArrayList<>();
        mount("cgroup2", null).ifPresent(p -> out.add(new Hierarchy("v2", p)));
        mount("cgroup", "devices").ifPresent(p -> out.add(new Hierarchy("v1-devices", p)));
        return out;
    }

    /** @return the v1 freezer hierarchy, if mounted */
    public static Optional<Path> freezer() {
        return mount("cgroup", "freezer");
    }

    /** Skips the test unless it runs as root with at least one hierarchy writable. */
    public static void assumeUsable() {
        assumeTrue(root(), "needs root (cgroups)");
        assumeTrue(!hierarchies().isEmpty(), "needs a cgroup2 or v1 devices hierarchy");
    }

    /** @return whether this process runs as root */
    public static boolean root() {
        try {
            return Files.readAllLines(Path.of("/proc/self/status")).stream().anyMatch(l -> l.matches("Uid:\\s+0\\s.*"));
        } catch (IOException e) {
            return false;
        }
    }

    private static Optional<Path> mount(String type, String option) {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/mountinfo"))) {
                String[] halves = line.split(" - ", 2);
                if (halves.length < 2) {
                    continue;
                }
                String[] after = halves[1].split(" ");
                String[] before = halves[0].split(" ");
                if (after[0].equals(type) && (option == null || List.of(after[after.length - 1].split(","))
                        .contains(option))) {
                    return Optional.of(Path.of(before[4]));
                }
            }
        } catch (IOException e) {
            return Optional.empty();
        }
        return Optional.empty();
    }

    /** @return a new parent cgroup of this test under {@code h}, removed by {@link #close} */
    public Path parent(Hierarchy h) {
        return mkdir(h.root().resolve("gpusched-test-" + HexFormat.of().formatHex(new SecureRandom()
                .generateSeed(4))));
    }

    /** @return {@code dir} made (and removed by {@link #close}, after its processes) */
    public Path mkdir(Path dir) {
        try {
            Files.createDirectory(dir);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        made.add(dir);
        return dir;
    }

    /**
     * Starts a job in {@code cgroup}: a shell that joins it, starts {@code sleep 300} in the background (a
     * grandchild of this JVM that the shell's death does not end) and waits.
     *
     * @return the pids in the cgroup once both are there
     */
    public List<Long> startJob(Path cgroup) throws Exception {
        Process p =
                new ProcessBuilder("sh", "-c", "echo $$ > '" + cgroup + "/cgroup.procs' || exit 1; sleep 300 & wait")
                        .redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
        started.add(p);
        for (int i = 0; i < 6000; i++) { // up to 60 s: a loaded host
            List<Long> pids = procs(cgroup);
            if (pids.size() >= 2 && pids.stream().anyMatch(x -> comm(x).equals("sleep"))) {
                return pids;
            }
            Thread.sleep(10);
        }
        throw new AssertionError("the job did not join " + cgroup + ": " + procs(cgroup));
    }

    /** @return a process that can serve as a holder and be killed: {@code sleep 300} */
    public Process holder() throws IOException {
        Process p = new ProcessBuilder("sleep", "300").start();
        started.add(p);
        return p;
    }

    /** @return the pids in {@code cgroup.procs} of {@code cgroup}, read here */
    public static List<Long> procs(Path cgroup) {
        try {
            return Files.readAllLines(cgroup.resolve("cgroup.procs")).stream().filter(s -> !s.isBlank())
                    .map(s -> Long.parseLong(s.strip())).toList();
        } catch (NoSuchFileException e) {
            return List.of();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** @return the command name of a pid, or "" when it is gone */
    public static String comm(long pid) {
        try {
            return Files.readString(Path.of("/proc", Long.toString(pid), "comm")).strip();
        } catch (IOException e) {
            return "";
        }
    }

    /** @return true while /proc shows the pid running (not a zombie) */
    public static boolean running(long pid) {
        try {
            String stat = Files.readString(Path.of("/proc", Long.toString(pid), "stat"), StandardCharsets.ISO_8859_1);
            char state = stat.substring(stat.lastIndexOf(')') + 1).trim().charAt(0);
            return state != 'Z' && state != 'X';
        } catch (IOException e) {
            return false;
        }
    }

    /** Moves {@code pids} into a new v1 freezer cgroup and freezes it; {@link #thaw} or {@link #close} undoes it. */
    public Path freeze(List<Long> pids) throws Exception {
        Path f = mkdir(freezer().orElseThrow().resolve("gpusched-test-" + HexFormat.of().formatHex(new SecureRandom()
                .generateSeed(4))));
        for (long pid : pids) {
            Files.writeString(f.resolve("cgroup.procs"), Long.toString(pid));
        }
        Files.writeString(f.resolve("freezer.state"), "FROZEN");
        // FREEZING until every task stopped: up to 60 s on a loaded host (a task still freezing could die of the
        // SIGKILL the caller's test relies on not ending it)
        for (int i = 0; i < 6000 && !Files.readString(f.resolve("freezer.state")).strip().equals("FROZEN"); i++) {
            Thread.sleep(10);
        }
        assertThat(Files.readString(f.resolve("freezer.state")).strip()).as("freezer state of " + f)
                .isEqualTo("FROZEN");
        return f;
    }

    /** Thaws a freezer cgroup made by {@link #freeze}. */
    public static void thaw(Path freezerCgroup) throws IOException {
        if (Files.exists(freezerCgroup)) {
            Files.writeString(freezerCgroup.resolve("freezer.state"), "THAWED");
        }
    }

    @Override
    public void close() throws Exception {
        for (Path d : made) {
            if (Files.exists(d.resolve("freezer.state"))) {
                thaw(d);
            }
        }
        for (int i = made.size() - 1; i >= 0; i--) {
            killAndRemove(made.get(i));
        }
        for (Process p : started) {
            p.destroyForcibly();
            p.waitFor(10, TimeUnit.SECONDS);
        }
    }

    private static void killAndRemove(Path dir) throws Exception {
        if (!Files.isDirectory(dir)) {
            return;
        }
        try (var children = Files.list(dir)) {
            for (Path c : children.filter(Files::isDirectory).toList()) {
                killAndRemove(c);
            }
        }
        for (int i = 0; i < 200 && Files.exists(dir); i++) {
            for (long pid : procs(dir)) {
                new ProcessBuilder("kill", "-9", Long.toString(pid)).start().waitFor();
            }
            try {
                Files.delete(dir);
            } catch (IOException busy) {
                Thread.sleep(10);
            }
        }
    }
}
