package io.gpusched.isolation;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.Allocation;
import io.gpusched.testing.LocalUsers;
import io.gpusched.testing.OwnThread;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * A bed for jobs run as their user: a {@link CgroupBed} (fake GPU nodes, a simulated 4-GPU host) in a directory every
 * user may traverse, real users ({@link LocalUsers}), and a {@link JobLauncher} whose cgroup parent is a fresh cgroup
 * of the chosen hierarchy. Closing ends every job cgroup left, the users and the cgroups.
 */
public final class JobBed implements AutoCloseable {
    public final Path dir;
    public final CgroupBed bed;
    public final LocalUsers users = LocalUsers.create();
    public final CgroupDeviceIsolator isolator;
    public final Path parent;
    public final JobLauncher launcher;
    private final List<LaunchedJob> jobs = new ArrayList<>();

    public JobBed(Path tmp, CgroupDeviceIsolator.Mechanism m) throws Exception {
        assumeTrue(LocalUsers.available(), "skipped: making users needs root, useradd and setpriv");
        assumeTrue(Files.isExecutable(Path.of("/usr/bin/setpriv")), "skipped: util-linux setpriv is missing");
        open(tmp);
        this.dir = Files.createDirectory(tmp.resolve("bed"));
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxr-xr-x"));
        this.bed = new CgroupBed(dir, false);
        Files.setPosixFilePermissions(bed.dev, PosixFilePermissions.fromString("rwxr-xr-x"));
        for (String n : bed.nodes) { // mknod's mode went through the umask; a driver's nodes are commonly 0666
            Files.setPosixFilePermissions(bed.dev.resolve(n), PosixFilePermissions.fromString("rw-rw-rw-"));
        }
        this.isolator = CgroupBed.usable(bed.builder(m).stateDir(tmp.resolve("iso-state")).build(), m);
        this.parent = bed.cgroup(CgroupBed.root(isolator, m));
        this.launcher = JobLauncher.builder().isolator(isolator).cgroupParent(parent).build();
    }

    /** Makes the temp dir and its parents traversable by the test's users (JUnit makes it 0700). */
    static void open(Path tmp) throws IOException {
        for (Path p = tmp; p != null && p.getNameCount() > 1; p = p.getParent()) {
            if (p.startsWith(Path.of("/tmp")) && !p.equals(Path.of("/tmp"))) {
                Files.setPosixFilePermissions(p, PosixFilePermissions.fromString("rwxr-xr-x"));
            }
        }
    }

    /** Allocates these GPUs. */
    public Allocation gpus(Integer... idx) {
        return bed.gpus(idx);
    }

    /** @return a spec for a user, with a small environment and {@code /} as working directory */
    public JobSpec spec(LocalUsers.User u, List<String> argv, Map<String, String> env) {
        Map<String, String> e = new LinkedHashMap<>(env);
        e.putIfAbsent("PATH", "/usr/bin:/bin");
        return new JobSpec(argv, e, Path.of("/"), u.uid(), u.gid(), u.name(),
                Optional.empty());
    }

    public LaunchedJob launch(JobSpec spec, Allocation a) {
        LaunchedJob j = launcher.launch("t" + a.id(), spec, a);
        jobs.add(j);
        return j;
    }

    /** Output of a piped job. */
    public record Result(int code, String out, String err) {
    }

    /** Waits for a piped job, reading both streams, then cleans it up. */
    public static Result finish(LaunchedJob j) throws Exception {
        CompletableFuture<byte[]> out = OwnThread.supply(() -> readAll(j.stdout()));
        CompletableFuture<byte[]> err = OwnThread.supply(() -> readAll(j.stderr()));
        int code = j.waitFor(Duration.ofSeconds(120)).orElseThrow(() -> new AssertionError(j + " still runs"));
        String o = new String(out.get(60, TimeUnit.SECONDS), StandardCharsets.UTF_8);
        String e = new String(err.get(60, TimeUnit.SECONDS), StandardCharsets.UTF_8);
        assertThat(j.cleanUp()).isEmpty();
        return new Result(code, o, e);
    }

    private static byte[] readAll(InputStream in) {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        try {
            in.transferTo(b);
        } catch (IOException e) {
            // the stream closed
        }
        return b.toByteArray();
    }

    /** A script that opens each node for reading and for writing and prints {@code node rw|r|w|-}. */
    public static final String PROBE = "for f in \"$@\"; do r=-; w=-;"
            + " e=$( (: < \"$f\") 2>&1); case \"$e\" in *'not permitted'*) ;; *) r=r;; esac;"
            + " e=$( (: >> \"$f\") 2>&1); case \"$e\" in *'not permitted'*) ;; *) w=w;; esac;"
            + " echo \"${f##*/} $r$w\"; done";

    /** @return argv that probes every node of the bed */
    public List<String> probeArgv() {
        List<String> cmd = new ArrayList<>(List.of("/bin/sh", "-c", PROBE, "probe"));
        for (String n : bed.nodes) {
            cmd.add(bed.dev.resolve(n).toString());
        }
        return cmd;
    }

    /** @return node name to access, parsed from a probe's output */
    public static Map<String, String> access(String out) {
        Map<String, String> m = new LinkedHashMap<>();
        for (String line : out.strip().split("\n")) {
            if (line.contains(" ")) {
                String acc = line.substring(line.lastIndexOf(' ') + 1).replace("--", "-").replace("-", "");
                m.put(line.substring(0, line.lastIndexOf(' ')), acc.isEmpty() ? "-" : acc);
            }
        }
        return m;
    }

    /** @return a fresh cgroup name under the job parent's hierarchy root, for tests that need another */
    public String uniqueName() {
        return "gpusched-test-" + UUID.randomUUID().toString().substring(0, 8);
    }

    @Override
    public void close() throws Exception {
        for (LaunchedJob j : jobs) {
            try {
                j.cleanUp();
            } catch (RuntimeException ignored) {
                // best effort
            }
        }
        try {
            launcher.endLeftovers(id -> false);
        } finally {
            launcher.close();
            bed.close();
            users.close();
        }
    }
}
