package io.gpusched.cli.nodeservice;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * The node service as an admin starts it: {@code java -jar gpusched.jar ... serve ...} from the build's jar, as root (a
 * child process of the test), every line it says kept in {@link #out}. The jar tests of the service share it.
 */
public final class JarService implements AutoCloseable {
    /** The line the service says once it serves. */
    public static final String SERVING = "gpusched node service on";
    /** The service's process. */
    public final Process process;
    /** Every line the service said (stdout and stderr), in order, as it says them. */
    public final LinkedBlockingQueue<String> out = new LinkedBlockingQueue<>();
    private final Thread pump;

    private JarService(Process process) {
        this.process = process;
        pump = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(process.getInputStream(),
                    StandardCharsets.UTF_8))) {
                String line;
                while ((line = r.readLine()) != null) {
                    out.add(line);
                }
            } catch (IOException ignored) {
                // the service ended
            }
        });
        pump.setDaemon(true);
        pump.start();
    }

    /** @return the build's jar ({@code target/gpusched.jar} of this module) */
    public static Path jar() {
        return Path.of("target", "gpusched.jar").toAbsolutePath();
    }

    /** @return this JVM's {@code java} */
    public static String java() {
        return Path.of(System.getProperty("java.home"), "bin", "java").toString();
    }

    /**
     * Starts {@code prefix... java -jar jar args...}; returns at once (see {@link #awaitServing}).
     *
     * @param prefix words before {@code java} (a command that runs it, such as {@code env --ignore-signal=...}); may
     *               be empty
     */
    public static JarService start(Path jar, List<String> prefix, List<String> args) throws IOException {
        List<String> cmd = new ArrayList<>(prefix);
        cmd.addAll(List.of(java(), "-jar", jar.toString()));
        cmd.addAll(args);
        return new JarService(new ProcessBuilder(cmd).redirectErrorStream(true).start());
    }

    /**
     * Waits up to 90 s for the service to say it serves.
     *
     * @return the lines it said until then, the serving line last; if it ended first, or did not say it within 90 s,
     *         what it said (the caller asserts on them)
     */
    public List<String> awaitServing() throws InterruptedException {
        List<String> seen = new ArrayList<>();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
        while (System.nanoTime() < deadline) {
            String line = out.poll(1, TimeUnit.SECONDS);
            if (line == null) {
                if (!process.isAlive() && !pump.isAlive() && out.isEmpty()) {
                    return seen;
                }
                continue;
            }
            seen.add(line);
            if (line.startsWith(SERVING)) {
                return seen;
            }
        }
        return seen;
    }

    /** @return whether {@code lines} end with the service saying it serves */
    public static boolean serving(List<String> lines) {
        return !lines.isEmpty() && lines.get(lines.size() - 1).startsWith(SERVING);
    }

    /** SIGTERM, then SIGKILL after 60 s. */
    @Override
    public void close() throws InterruptedException {
        if (process.isAlive()) {
            process.destroy();
            if (!process.waitFor(60, TimeUnit.SECONDS)) {
                process.destroyForcibly().waitFor(30, TimeUnit.SECONDS);
            }
        }
    }
}
