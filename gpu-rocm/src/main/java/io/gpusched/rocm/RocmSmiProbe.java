package io.gpusched.rocm;

import io.gpusched.rocm.internal.RocmSmiProbeMain;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Runs ROCm SMI in a child JVM ({@link RocmSmiProbeMain}) before this process calls it: librocm_smi {@code assert()}s
 * and dereferences bad pointers on sysfs shapes no Java check can list for every version, and a crash in a child
 * costs a cause, not the host process. Verdicts are cached per JVM by a digest of what the library reads at init: the
 * library file itself (its real path, size and modification time, or those of every {@code librocm_smi64.so*} on the
 * search path when no path is given, so an upgrade in place probes again), every file and link target of
 * {@code /sys/class/kfd/kfd/topology}, and each {@code /sys/class/drm} entry with its link target and its device's
 * identity files (vendor, device, revision, subsystem ids; not live counters, which would defeat the cache). A node
 * pays one child start per such state. The child has a time limit.
 */
final class RocmSmiProbe {
    private static final Logger LOG = LoggerFactory.getLogger(RocmSmiProbe.class);
    private static final Map<String, Optional<String>> VERDICTS = new ConcurrentHashMap<>();
    private static final Path KFD = Path.of("sys/class/kfd/kfd/topology");
    private static final Path DRM = Path.of("sys/class/drm");
    /** Identity files of a DRM device that ROCm SMI reads to enumerate; static for the device's life. */
    private static final List<String> DRM_IDENTITY = List.of("vendor", "device", "revision", "subsystem_vendor",
            "subsystem_device", "unique_id");
    /** Where the dynamic linker finds librocm_smi64 when no path is given (besides jna.library.path). */
    private static final List<String> LIBRARY_DIRS = List.of("/opt/rocm/lib", "/opt/rocm/lib64",
            "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib");

    /** Default time limit of the child, overridable with {@code -Dgpusched.rocm-smi.probe.timeout-s}. */
    static final Duration TIMEOUT = Duration.ofSeconds(Long.getLong("gpusched.rocm-smi.probe.timeout-s", 60));

    private RocmSmiProbe() {
    }

    /**
     * @return false where there is nothing for ROCm SMI to trip on: no KFD topology and no DRM device of AMD's vendor
     *         id (an NVIDIA or GPU-less host), where rsmi_init fails cleanly; saves a child JVM on such hosts
     */
    static boolean needed(Path sysfsRoot) {
        if (Files.exists(sysfsRoot.resolve("class/kfd/kfd/topology/nodes"))) {
            return true;
        }
        Path drm = sysfsRoot.resolve("class/drm");
        if (!Files.isDirectory(drm)) {
            return false;
        }
        try (Stream<Path> s = Files.list(drm)) {
            return s.anyMatch(p -> {
                try {
                    Path v = p.resolve("device/vendor");
                    return Files.isRegularFile(v) && Files.readString(v).trim().equalsIgnoreCase("0x1002");
                } catch (IOException | UncheckedIOException e) {
                    return true;
                }
            });
        } catch (IOException | UncheckedIOException e) {
            return true;
        }
    }

    /** @return why ROCm SMI must not be called in this process, or empty when the probe came back alive */
    static Optional<String> check(Optional<Path> library) {
        String key = fingerprint(library, Path.of("/"));
        Optional<String> cached = VERDICTS.get(key);
        if (cached != null) {
            return cached;
        }
        Optional<String> verdict = run(library, TIMEOUT);
        VERDICTS.put(key, verdict);
        return verdict;
    }

    /** Forgets cached verdicts (tests). */
    static void forget() {
        VERDICTS.clear();
    }

    static Optional<String> run(Optional<Path> library, Duration timeout) {
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-Xmx64m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto"));
        for (String p : List.of("jna.library.path", "jna.boot.library.path", "jna.tmpdir", "jna.nosys",
                "jna.noclasspath")) {
            if (System.getProperty(p) != null) {
                cmd.add("-D" + p + "=" + System.getProperty(p));
            }
        }
        cmd.add("-cp");
        try {
            cmd.add(RocmSmiProbeMain.classpath());
        } catch (IllegalStateException e) {
            return Optional.of("cannot run the ROCm SMI probe process (" + e.getMessage() + "); set"
                    + " -Dgpusched.rocm-smi.probe=false to call ROCm SMI after the KFD check alone");
        }
        cmd.add(RocmSmiProbeMain.class.getName());
        cmd.add(library.map(p -> p.toAbsolutePath().toString()).orElse(""));
        Process p;
        try {
            p = new ProcessBuilder(cmd).redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null"))).start();
        } catch (IOException e) {
            return Optional.of("cannot start the ROCm SMI probe process (" + e.getMessage() + "); set"
                    + " -Dgpusched.rocm-smi.probe=false to call ROCm SMI after the KFD check alone");
        }
        CompletableFuture<String> out = drain(p.getInputStream());
        CompletableFuture<String> err = drain(p.getErrorStream());
        try {
            if (!p.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
                p.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
                return Optional.of("the ROCm SMI probe process did not finish within " + timeout.toSeconds()
                        + " s (last step: " + last(out.getNow("")) + "); ROCm SMI is not called in this process");
            }
        } catch (InterruptedException e) {
            p.destroyForcibly();
            Thread.currentThread().interrupt();
            return Optional.of("interrupted while the ROCm SMI probe process ran");
        }
        String stdout = out.join();
        String stderr = err.join();
        int rc = p.exitValue();
        if (rc == 0 && stdout.lines().anyMatch("ok"::equals)) {
            LOG.debug("ROCm SMI probe process: {}", stdout.replace('\n', ';'));
            return Optional.empty();
        }
        String signal = rc > 128 && rc < 160 ? " = " + signalName(rc - 128) : "";
        String why = stderr.lines().filter(l -> l.contains("Assertion") || l.contains("terminate")
                || l.contains("what()")).reduce((a, b) -> b).orElse(last(stderr));
        String cause = "ROCm SMI killed its probe process (exit " + rc + signal + ") after \"" + last(stdout)
                + "\"" + (why.isEmpty() ? "" : ": " + why.trim()) + "; it is not called in this process";
        LOG.warn("{}", cause);
        return Optional.of(cause);
    }

    private static String signalName(int s) {
        return switch (s) {
            case 6 -> "SIGABRT";
            case 9 -> "SIGKILL";
            case 11 -> "SIGSEGV";
            case 7 -> "SIGBUS";
            case 4 -> "SIGILL";
            case 8 -> "SIGFPE";
            default -> "signal " + s;
        };
    }

    private static String last(String text) {
        return text.lines().filter(l -> !l.isBlank()).reduce((a, b) -> b).orElse("").trim();
    }

    private static CompletableFuture<String> drain(InputStream in) {
        return CompletableFuture.supplyAsync(() -> {
            try (in) {
                byte[] b = in.readNBytes(1 << 20);
                in.transferTo(OutputStreamSink.INSTANCE);
                return new String(b, StandardCharsets.UTF_8);
            } catch (IOException e) {
                return "";
            }
        }, r -> {
            Thread t = new Thread(r, "gpusched-rocm-smi-probe-io");
            t.setDaemon(true);
            t.start();
        });
    }

    /** Discards the rest of an over-long stream. */
    private static final class OutputStreamSink extends OutputStream {
        static final OutputStreamSink INSTANCE = new OutputStreamSink();

        @Override
        public void write(int b) {
        }

        @Override
        public void write(byte[] b, int off, int len) {
        }
    }

    /**
     * @param root the file system root ({@code /}; a test tree in tests)
     * @return a digest of what ROCm SMI reads at init: the library file, the KFD topology, the DRM entries
     */
    static String fingerprint(Optional<Path> library, Path root) {
        MessageDigest md;
        try {
            md = MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
        md.update(library.map(Path::toString).orElse("<search>").getBytes(StandardCharsets.UTF_8));
        md.update((byte) 0);
        if (library.isPresent()) {
            digestFile(md, library.get());
        } else {
            List<String> dirs = new ArrayList<>();
            for (String p : List.of("jna.library.path", "jna.boot.library.path")) {
                String v = System.getProperty(p);
                if (v != null) {
                    dirs.addAll(List.of(v.split(File.pathSeparator)));
                }
            }
            dirs.addAll(LIBRARY_DIRS);
            for (String d : dirs) {
                Path dir = d.isEmpty() ? null : root.resolve(d.startsWith("/") ? d.substring(1) : d);
                if (dir == null || !Files.isDirectory(dir)) {
                    continue;
                }
                try (Stream<Path> s = Files.list(dir)) {
                    for (Path lib : s.filter(x -> x.getFileName().toString().startsWith("librocm_smi64.so"))
                            .sorted().toList()) {
                        digestFile(md, lib);
                    }
                } catch (IOException | UncheckedIOException e) {
                    md.update(("libdir:" + e).getBytes(StandardCharsets.UTF_8));
                }
            }
        }
        digestTree(md, root.resolve(KFD));
        Path drm = root.resolve(DRM);
        if (Files.isDirectory(drm)) {
            try (Stream<Path> s = Files.list(drm)) {
                for (Path p : s.sorted().toList()) {
                    md.update(p.getFileName().toString().getBytes(StandardCharsets.UTF_8));
                    md.update((byte) 0);
                    if (Files.isSymbolicLink(p)) {
                        md.update(Files.readSymbolicLink(p).toString().getBytes(StandardCharsets.UTF_8));
                    }
                    md.update((byte) 1);
                    Path device = p.resolve("device");
                    if (Files.isSymbolicLink(device)) {
                        md.update(Files.readSymbolicLink(device).toString().getBytes(StandardCharsets.UTF_8));
                    }
                    md.update((byte) 2);
                    for (String f : DRM_IDENTITY) {
                        Path id = p.resolve("device").resolve(f);
                        md.update(f.getBytes(StandardCharsets.UTF_8));
                        try (InputStream in = Files.newInputStream(id)) {
                            md.update(in.readNBytes(256));
                        } catch (IOException | SecurityException e) {
                            md.update((byte) 'e');
                        }
                        md.update((byte) 0);
                    }
                }
            } catch (IOException | UncheckedIOException e) {
                md.update(("drm:" + e).getBytes(StandardCharsets.UTF_8));
            }
        }
        return HexFormat.of().formatHex(md.digest());
    }

    /**
     * Digests a file's identity: where it really is, its size, its modification time (not its bytes: a big library).
     */
    private static void digestFile(MessageDigest md, Path file) {
        try {
            md.update(file.toRealPath().toString().getBytes(StandardCharsets.UTF_8));
            var a = Files.readAttributes(file, BasicFileAttributes.class);
            md.update((a.size() + "/" + a.lastModifiedTime().toMillis() + "/" + a.fileKey())
                    .getBytes(StandardCharsets.UTF_8));
        } catch (IOException | SecurityException e) {
            md.update(("file:" + file + ":" + e.getClass().getSimpleName()).getBytes(StandardCharsets.UTF_8));
        }
        md.update((byte) 0);
    }

    private static void digestTree(MessageDigest md, Path root) {
        if (!Files.exists(root)) {
            md.update("absent".getBytes(StandardCharsets.UTF_8));
            return;
        }
        try (Stream<Path> s = Files.walk(root)) {
            for (Path p : s.sorted().toList()) {
                md.update(root.relativize(p).toString().getBytes(StandardCharsets.UTF_8));
                if (Files.isRegularFile(p, LinkOption.NOFOLLOW_LINKS)) {
                    md.update((byte) 'f');
                    try (InputStream in = Files.newInputStream(p)) {
                        md.update(in.readNBytes(1 << 16));
                    } catch (IOException e) {
                        md.update((byte) 'e');
                    }
                } else if (Files.isSymbolicLink(p)) {
                    md.update((byte) 'l');
                    try {
                        md.update(Files.readSymbolicLink(p).toString().getBytes(StandardCharsets.UTF_8));
                    } catch (IOException e) {
                        md.update((byte) 'e');
                    }
                } else {
                    md.update((byte) (Files.isDirectory(p) ? 'd' : 'o'));
                }
                md.update((byte) 0);
            }
        } catch (IOException | UncheckedIOException e) {
            md.update(("walk:" + e).getBytes(StandardCharsets.UTF_8));
        }
    }
}
