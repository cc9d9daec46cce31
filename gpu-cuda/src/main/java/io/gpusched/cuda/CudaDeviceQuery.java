package io.gpusched.cuda;

import io.gpusched.cuda.internal.CudaDriverQueryMain;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileSystemNotFoundException;
import java.nio.file.Path;
import java.security.CodeSource;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.TimeUnit;

/**
 * Asks the CUDA driver API which devices it sees: {@code cuInit}, {@code cuDeviceGetCount} and each device's
 * {@code cuDeviceGetUuid} from the driver's {@code libcuda.so.1} (the driver always ships it: no CUDA toolkit needed),
 * in a child JVM with {@code CUDA_VISIBLE_DEVICES} set to the GPUs asked about, so the driver's state and any crash in
 * it stay out of the caller's process. {@code gpusched selftest} compares the answer with discovery.
 */
public final class CudaDeviceQuery {
    /** The driver API library every NVIDIA driver installs. */
    public static final String DRIVER_LIBRARY = "libcuda.so.1";
    /** Most bytes of the query process's protocol lines kept; the rest of its output is read and discarded. */
    static final int MAX_OUTPUT = 1 << 16;
    /** Longest line of the query process's output kept; longer lines are read and discarded. */
    static final int MAX_LINE = 4096;

    private CudaDeviceQuery() {
    }

    /** How the query ended. */
    public enum Status {
        /** The driver answered: {@link Result#uuids()} are its devices. */
        ANSWERED,
        /** No CUDA driver library could be loaded here (or native calls are disabled): the message says why. */
        NO_DRIVER,
        /** The library loaded but a call failed, the child crashed or did not answer in time: the message says how. */
        FAILED
    }

    /**
     * A query's outcome.
     *
     * @param status  how it ended
     * @param uuids   the devices' UUIDs ({@code GPU-...}) in CUDA's order; empty unless answered
     * @param message what went wrong; empty when answered
     */
    public record Result(Status status, List<String> uuids, String message) {
        /** Copies the list. */
        public Result {
            Objects.requireNonNull(status, "status");
            uuids = List.copyOf(uuids);
            Objects.requireNonNull(message, "message");
        }
    }

    /**
     * Runs the query.
     *
     * @param library        the driver library: {@link #DRIVER_LIBRARY} for the dynamic loader to find, or a path
     * @param visibleDevices what {@code CUDA_VISIBLE_DEVICES} is set to in the child (the GPUs' UUIDs)
     * @param timeout        how long the child may take before it is killed and the query FAILED
     * @return the outcome; never throws for a missing or misbehaving driver
     */
    public static Result run(String library, List<String> visibleDevices, Duration timeout) {
        Objects.requireNonNull(library, "library");
        if (Boolean.getBoolean("gpusched.native.disable")) {
            return new Result(Status.NO_DRIVER, List.of(), "native calls are disabled (gpusched.native.disable)");
        }
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java")
                .toString(), "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx64m"));
        for (String p : List.of("jna.library.path", "jna.boot.library.path", "jna.tmpdir", "jna.nosys")) {
            String v = System.getProperty(p);
            if (v != null) {
                cmd.add("-D" + p + "=" + v);
            }
        }
        cmd.addAll(List.of("-cp", classPath(), CudaDriverQueryMain.class.getName(), library));
        // stderr goes nowhere (no pipe to fill); stdout is read as it comes (OutputLines)
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.DISCARD);
        Map<String, String> env = pb.environment();
        env.remove("JAVA_TOOL_OPTIONS");
        env.remove("JDK_JAVA_OPTIONS");
        env.remove("_JAVA_OPTIONS");
        env.put("CUDA_VISIBLE_DEVICES", String.join(",", visibleDevices));
        env.put("CUDA_DEVICE_ORDER", "PCI_BUS_ID");
        return query(pb, timeout);
    }

    /**
     * Runs the query process and reads its output while it runs (a child that prints more than a pipe holds neither
     * blocks nor grows this process's memory: {@link OutputLines}).
     *
     * @param pb      the query process, its stderr already redirected away from a pipe
     * @param timeout how long it may take before it (and whatever it started) is killed and the query FAILED
     * @return the outcome
     */
    static Result query(ProcessBuilder pb, Duration timeout) {
        Process p;
        try {
            p = pb.start();
        } catch (IOException e) {
            return new Result(Status.FAILED, List.of(), "the query process could not start: " + e.getMessage());
        }
        OutputLines out = new OutputLines(p.getInputStream());
        Thread reader = new Thread(out, "cuda-query-output");
        reader.setDaemon(true);
        reader.start();
        try {
            if (!p.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
                kill(p);
                return new Result(Status.FAILED, List.of(), "the CUDA driver did not answer within "
                        + timeout.toSeconds() + " s (the query process was killed)" + out.discardedNote());
            }
            // the rest of its output is in the pipe already, unless something it started still holds the pipe open:
            // then what the query printed is taken once the reader has drained it (nothing new for a moment)
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(READ_AFTER_EXIT_SECONDS);
            long seen = -1;
            while (reader.isAlive() && System.nanoTime() < until) {
                reader.join(QUIET_MILLIS);
                long now = out.read();
                if (reader.isAlive() && now == seen) {
                    Result drained = parse(out.kept(), p.exitValue());
                    if (drained.status() == Status.ANSWERED) {
                        return drained; // the pipe's other holder is left to end it; the reader is a daemon
                    }
                }
                seen = now;
            }
            if (reader.isAlive()) {
                kill(p);
                return new Result(Status.FAILED, List.of(), "the query process exited " + p.exitValue()
                        + " but its output did not end within " + READ_AFTER_EXIT_SECONDS
                        + " s (a process it started keeps writing)" + out.discardedNote());
            }
            if (out.failure() != null) {
                return new Result(Status.FAILED, List.of(), "reading the query process failed: "
                        + out.failure().getMessage());
            }
            return parse(out.kept(), p.exitValue());
        } catch (InterruptedException e) {
            kill(p);
            Thread.currentThread().interrupt();
            return new Result(Status.FAILED, List.of(), "interrupted");
        }
    }

    /** How long the output is read after the query process exited. */
    static final int READ_AFTER_EXIT_SECONDS = 5;
    /** How long the pipe must stay quiet, after the query process exited, for its output to count as read. */
    static final int QUIET_MILLIS = 100;

    private static void kill(Process p) {
        p.descendants().forEach(ProcessHandle::destroyForcibly);
        p.destroyForcibly();
        try {
            p.waitFor(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        try {
            p.getInputStream().close();
        } catch (IOException ignored) {
            // the reader is a daemon thread and ends with the pipe
        }
    }

    /**
     * Reads the query process's stdout as it comes, keeping only the lines of the query's protocol ({@code nolib},
     * {@code error}, {@code count}, {@code uuid}) of at most {@value #MAX_LINE} bytes each, and at most
     * {@value #MAX_OUTPUT} bytes of them in all: whatever else a driver library prints (to the same stdout) is read
     * and discarded, so the child never blocks on a full pipe and this process keeps a bounded amount.
     */
    static final class OutputLines implements Runnable {
        private final InputStream in;
        private final StringBuilder kept = new StringBuilder();
        private final byte[] line = new byte[MAX_LINE];
        private int length;
        private boolean overlong;
        private long discarded;
        private long read;
        private volatile IOException failure;

        OutputLines(InputStream in) {
            this.in = in;
        }

        @Override
        public void run() {
            byte[] buf = new byte[8192];
            try (in) {
                int n;
                while ((n = in.read(buf)) > 0) {
                    accept(buf, n);
                }
                if (length > 0 || overlong) {
                    endLine();
                }
            } catch (IOException e) {
                failure = e;
            }
        }

        synchronized void accept(byte[] buf, int n) {
            read += n;
            for (int i = 0; i < n; i++) {
                byte b = buf[i];
                if (b == '\n') {
                    endLine();
                } else if (length < MAX_LINE) {
                    line[length++] = b;
                } else {
                    overlong = true;
                }
            }
        }

        private void endLine() {
            String s = new String(line, 0, length, StandardCharsets.UTF_8);
            boolean protocol = s.startsWith("nolib ") || s.startsWith("error ") || s.startsWith("count ")
                    || s.startsWith("uuid ");
            if (!overlong && protocol && kept.length() + length + 1 <= MAX_OUTPUT) {
                kept.append(s).append('\n');
            } else {
                discarded += length + 1;
            }
            length = 0;
            overlong = false;
        }

        /** @return how many bytes were read so far */
        synchronized long read() {
            return read;
        }

        /** @return the protocol lines kept, each ending in a newline */
        synchronized String kept() {
            return kept.toString();
        }

        /** @return how many bytes were read and not kept (counting a cut line's kept part) */
        synchronized long discarded() {
            return discarded;
        }

        IOException failure() {
            return failure;
        }

        synchronized String discardedNote() {
            return discarded == 0 ? "" : "; " + discarded + " bytes of other output were discarded";
        }
    }

    /**
     * @return where the child's classes are: this module's and JNA's code sources (one jar when shaded, the caller's
     *         class path when a class loader does not say)
     */
    static String classPath() {
        List<String> parts = new ArrayList<>();
        for (Class<?> c : CudaDriverQueryMain.classPathRoots()) {
            CodeSource cs = c.getProtectionDomain().getCodeSource();
            try {
                String part = cs == null || cs.getLocation() == null ? null
                        : Path.of(cs.getLocation().toURI()).toString();
                if (part == null) {
                    return System.getProperty("java.class.path");
                }
                if (!parts.contains(part)) {
                    parts.add(part);
                }
            } catch (URISyntaxException | IllegalArgumentException | FileSystemNotFoundException e) {
                return System.getProperty("java.class.path");
            }
        }
        return String.join(File.pathSeparator, parts);
    }

    /** @return the child's answer read from its output and exit status */
    static Result parse(String out, int exit) {
        List<String> uuids = new ArrayList<>();
        int count = -1;
        for (String line : out.split("\n")) {
            if (line.startsWith("nolib ")) {
                return new Result(Status.NO_DRIVER, List.of(), line.substring(6));
            }
            if (line.startsWith("error ")) {
                String[] f = line.split(" ", 4);
                return new Result(Status.FAILED, List.of(), f.length == 4 ? f[1] + " returned " + f[2] + " ("
                        + f[3] + ")" : line.substring(6));
            }
            if (line.startsWith("count ")) {
                try {
                    count = Integer.parseInt(line.substring(6).strip());
                } catch (NumberFormatException e) {
                    return new Result(Status.FAILED, List.of(), "unreadable count: " + line);
                }
            } else if (line.startsWith("uuid ")) {
                uuids.add(line.substring(5).strip());
            }
        }
        if (exit != 0 || count < 0 || count != uuids.size()) {
            return new Result(Status.FAILED, List.of(), "the query process exited " + exit + " after "
                    + (count < 0 ? "no device count" : uuids.size() + " of " + count + " UUIDs")
                    + " (a crash in the driver library?)");
        }
        return new Result(Status.ANSWERED, uuids, "");
    }
}
