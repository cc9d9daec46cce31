package io.gpusched.rocm;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

/**
 * Runs a child JVM (or any command) that sees a chosen KFD tree at the hard-wired {@code /sys/class/kfd/kfd/topology}:
 * librocm_smi 5.x has no override for it (only for DRM, hwmon and power roots), so the child gets a private mount
 * namespace ({@code unshare -m}) with a tmpfs over {@code /sys/class} holding an empty {@code drm/} and {@code hwmon/}
 * and the tree bind-mounted at {@code kfd/kfd/topology}. Needs root (CAP_SYS_ADMIN), as in CI; the host's mounts are
 * untouched.
 */
final class KfdNamespace {
    static final Path REAL_LIBRARY = Path.of("/usr/lib/librocm_smi64.so.1");
    private static Optional<String> reason;

    private KfdNamespace() {
    }

    /** @return why the real library cannot be run in a namespace here, or empty */
    static synchronized Optional<String> unavailableReason() {
        if (reason == null) {
            reason = probe();
        }
        return reason;
    }

    private static Optional<String> probe() {
        if (!Files.exists(REAL_LIBRARY)) {
            return Optional.of(REAL_LIBRARY + " is absent (install Debian's librocm-smi64-1)");
        }
        try {
            Process p = new ProcessBuilder("unshare", "-m", "--propagation", "private", "sh", "-c",
                    "mount -t tmpfs gpusched-probe /sys/class && echo mounted").redirectErrorStream(true).start();
            String out = new String(p.getInputStream().readAllBytes());
            if (!p.waitFor(30, TimeUnit.SECONDS) || p.exitValue() != 0 || !out.contains("mounted")) {
                return Optional.of("cannot mount in a private mount namespace (needs root): " + out.trim());
            }
        } catch (IOException | InterruptedException e) {
            return Optional.of("unshare is not usable: " + e.getMessage());
        }
        return Optional.empty();
    }

    /** @return the command line that runs {@code command} with {@code topology} as the KFD topology */
    static List<String> command(Path topology, List<String> command) {
        List<String> cmd = new ArrayList<>(List.of("unshare", "-m", "--propagation", "private", "sh", "-c",
                "set -e; mount -t tmpfs gpusched-test /sys/class; mkdir -p /sys/class/kfd/kfd/topology /sys/class/drm"
                        + " /sys/class/hwmon; mount --bind \"$0\" /sys/class/kfd/kfd/topology; exec \"$@\"",
                topology.toAbsolutePath().toString()));
        cmd.addAll(command);
        return cmd;
    }

    /** @return a java command line running {@code main} on the test class path */
    static List<String> java(String main, String... args) {
        String cp = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=error",
                "-cp", cp, main));
        cmd.addAll(List.of(args));
        return cmd;
    }

    /** Result of a finished child. */
    record Result(int exit, String stdout, String stderr) {
    }

    /** Runs a child to its end (time limit {@code seconds}). */
    static Result run(Path topology, List<String> command, int seconds) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(command(topology, command)).redirectInput(new File("/dev/null")).start();
        var out = new java.util.concurrent.CompletableFuture<String>();
        var err = new java.util.concurrent.CompletableFuture<String>();
        drain(p.getInputStream(), out);
        drain(p.getErrorStream(), err);
        if (!p.waitFor(seconds, TimeUnit.SECONDS)) {
            p.destroyForcibly().waitFor();
            throw new AssertionError("child did not finish in " + seconds + " s: " + command);
        }
        return new Result(p.exitValue(), out.join(), err.join());
    }

    static void drain(InputStream in, java.util.concurrent.CompletableFuture<String> into) {
        Thread t = new Thread(() -> {
            try (in) {
                into.complete(new String(in.readAllBytes()));
            } catch (IOException e) {
                into.complete("");
            }
        });
        t.setDaemon(true);
        t.start();
    }

    /** Builds the bare C probe of the real library; empty when gcc or the header is missing. */
    static Optional<Path> bareProbe(Path dir) throws IOException, InterruptedException {
        if (FakeRocmSmi.unavailableReason().isPresent()) {
            return Optional.empty();
        }
        Path src = dir.resolve("rsmi_bare_probe.c");
        try (InputStream in = KfdNamespace.class.getResourceAsStream("/native/rsmi_bare_probe.c")) {
            Files.copy(in, src, StandardCopyOption.REPLACE_EXISTING);
        }
        Path out = dir.resolve("rsmi_bare_probe");
        Process p = new ProcessBuilder("/usr/bin/gcc", "-std=c11", "-Wall", "-Werror", "-o", out.toString(),
                src.toString(), REAL_LIBRARY.toString()).redirectErrorStream(true).start();
        String log = new String(p.getInputStream().readAllBytes());
        if (!p.waitFor(120, TimeUnit.SECONDS) || p.exitValue() != 0) {
            throw new IOException("gcc failed for the bare ROCm SMI probe: " + log);
        }
        return Optional.of(out);
    }

    /** Copies a tree (no links followed). */
    static Path copy(Path from, Path to) throws IOException {
        try (var s = Files.walk(from)) {
            for (Path p : s.toList()) {
                Path t = to.resolve(from.relativize(p).toString());
                if (Files.isDirectory(p)) {
                    Files.createDirectories(t);
                } else {
                    Files.copy(p, t, StandardCopyOption.REPLACE_EXISTING);
                }
            }
        }
        return to;
    }
}
