package io.gpusched.slurm;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Processes a test starts and must stop, by their own handles (never by name): stopped in {@link #close()} and by a
 * shutdown hook if the JVM goes first.
 */
final class Daemons implements AutoCloseable {
    record Result(int exit, String out) {
    }

    private final List<Process> started = Collections.synchronizedList(new ArrayList<>());
    private final Thread hook = new Thread(this::stopAll, "stop-test-daemons");
    private final Map<String, String> env;

    Daemons(Map<String, String> env) {
        this.env = env;
        Runtime.getRuntime().addShutdownHook(hook);
    }

    /** Starts a daemon in the foreground, its output to {@code log}. */
    Process start(Path log, String... cmd) throws IOException {
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile());
        pb.environment().putAll(env);
        Process p = pb.start();
        started.add(p);
        return p;
    }

    /** Stops one daemon (TERM, then KILL after 10 s) and waits for it. */
    void stop(Process p) throws InterruptedException {
        p.destroy();
        if (!p.waitFor(10, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            p.waitFor(10, TimeUnit.SECONDS);
        }
        started.remove(p);
    }

    /** Runs a command to its end (at most {@code seconds}), output and error together. */
    Result run(int seconds, String... cmd) throws IOException, InterruptedException {
        File out = File.createTempFile("gpusched-cmd", ".out");
        try {
            ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(out);
            pb.environment().putAll(env);
            Process p = pb.start();
            if (!p.waitFor(seconds, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                p.waitFor(10, TimeUnit.SECONDS);
                return new Result(124, Files.readString(out.toPath(), StandardCharsets.UTF_8) + "\n(timed out after "
                        + seconds + " s: " + String.join(" ", cmd) + ")");
            }
            return new Result(p.exitValue(), Files.readString(out.toPath(), StandardCharsets.UTF_8));
        } finally {
            Files.deleteIfExists(out.toPath());
        }
    }

    static boolean onPath(String cmd) {
        for (String dir : System.getenv().getOrDefault("PATH", "").split(":")) {
            if (Files.isExecutable(Path.of(dir, cmd))) {
                return true;
            }
        }
        return Files.isExecutable(Path.of("/usr/sbin", cmd)) || Files.isExecutable(Path.of("/sbin", cmd));
    }

    static String path(String cmd) {
        for (String dir : (System.getenv().getOrDefault("PATH", "") + ":/usr/sbin:/sbin").split(":")) {
            if (Files.isExecutable(Path.of(dir, cmd))) {
                return Path.of(dir, cmd).toString();
            }
        }
        return cmd;
    }

    private void stopAll() {
        List<Process> copy;
        synchronized (started) {
            copy = new ArrayList<>(started);
        }
        Collections.reverse(copy);
        for (Process p : copy) {
            try {
                stop(p);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                p.destroyForcibly();
            }
        }
    }

    @Override
    public void close() {
        stopAll();
        try {
            Runtime.getRuntime().removeShutdownHook(hook);
        } catch (IllegalStateException e) {
            // already shutting down: the hook runs anyway
        }
    }
}
