package io.gpusched.testing;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;

/**
 * The durability tests' LD_PRELOAD shim ({@code fsync-shim/fsync_shim.c} on the class path): built with gcc into a
 * test's directory, it logs, in one order, what a child JVM writes to one watched file, each {@code fsync} or
 * {@code fdatasync} of it (before and after) and what the child prints, so that a checker that shares no code with
 * the writer can tell whether a record was acknowledged before a force covered it. The log format is the source's.
 */
public final class FsyncShim {
    private FsyncShim() {
    }

    /**
     * Compiles the shim.
     *
     * @param dir where the source and the shared object go
     * @return the shared object, for {@code LD_PRELOAD}
     * @throws IOException when gcc cannot be started (not installed: {@code .ci/install-test-deps} installs it)
     * @throws IllegalStateException when gcc fails (its output is the message)
     */
    public static Path build(Path dir) throws IOException, InterruptedException {
        Path src = dir.resolve("fsync_shim.c");
        try (InputStream in = FsyncShim.class.getResourceAsStream("/fsync-shim/fsync_shim.c")) {
            if (in == null) {
                throw new IllegalStateException("fsync-shim/fsync_shim.c is not on the class path");
            }
            Files.copy(in, src);
        }
        Path so = dir.resolve("fsync_shim.so");
        Process gcc = new ProcessBuilder("gcc", "-shared", "-fPIC", "-O2", "-Wall", "-o", so.toString(),
                src.toString(), "-ldl").redirectErrorStream(true).start();
        String out = new String(gcc.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (gcc.waitFor() != 0) {
            throw new IllegalStateException("gcc failed on the shim: " + out);
        }
        return so;
    }

    /**
     * @param so               the shim ({@link #build})
     * @param log              the log it appends to
     * @param watched          the absolute path of the file it watches
     * @param forceDelayMicros how long each force of the watched file is slowed (a slow disk), 0 for none
     * @return the environment a child needs
     */
    public static Map<String, String> environment(Path so, Path log, Path watched, long forceDelayMicros) {
        return Map.of("LD_PRELOAD", so.toString(), "FSYNC_SHIM_LOG", log.toString(), "FSYNC_SHIM_FILE",
                watched.toAbsolutePath().normalize().toString(), "FSYNC_SHIM_FORCE_DELAY_US",
                String.valueOf(forceDelayMicros));
    }
}
