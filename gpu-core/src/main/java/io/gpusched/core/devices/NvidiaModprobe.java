package io.gpusched.core.devices;

import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.concurrent.TimeUnit;

/**
 * NVIDIA's helper {@code nvidia-modprobe}, run as {@code nvidia-modprobe -u -c=0} (as NVIDIA's container toolkit
 * does) to load the {@code nvidia-uvm} module on demand and make {@code /dev/nvidia-uvm} and
 * {@code /dev/nvidia-uvm-tools}, so that a fence knows the uvm major it must allow. Root runs it, so only a binary that
 * root alone could have put there is run: the file (and the file a link leads to) owned by root and writable by no one
 * else, every directory above it owned by root and writable by no one else (a root-owned sticky directory such as
 * {@code /tmp} excepted: others cannot replace root's entries in it). It runs with an empty environment but for
 * {@code PATH}, {@code /dev/null} as input, and a time limit; its output is kept (the first 4 KiB) for the caller's
 * notes.
 */
public final class NvidiaModprobe {
    /** Where {@link #find()} looks, in order. */
    public static final List<Path> LOCATIONS = List.of(Path.of("/usr/bin/nvidia-modprobe"),
            Path.of("/usr/sbin/nvidia-modprobe"), Path.of("/bin/nvidia-modprobe"), Path.of("/sbin/nvidia-modprobe"),
            Path.of("/usr/local/bin/nvidia-modprobe"), Path.of("/usr/local/sbin/nvidia-modprobe"));
    /** The arguments that load {@code nvidia-uvm} and make its nodes (minor 0 and the tools node). */
    public static final List<String> UVM_ARGUMENTS = List.of("-u", "-c=0");
    /** How long it may run by default. */
    public static final Duration DEFAULT_TIMEOUT = Duration.ofSeconds(10);
    private static final int KEEP_OUTPUT = 4096;
    private static final int STICKY = 01000;

    private final Path binary;

    private NvidiaModprobe(Path binary) {
        this.binary = binary;
    }

    /** @return the first of {@link #LOCATIONS} that exists (whether root may run it is checked at each run) */
    public static Optional<NvidiaModprobe> find() {
        return LOCATIONS.stream().filter(Files::exists).findFirst().map(NvidiaModprobe::new);
    }

    /**
     * @param binary an absolute path to the helper (tests: a stand-in)
     * @return the helper there (whether root may run it is checked at each run)
     * @throws IllegalArgumentException for a relative path
     */
    public static NvidiaModprobe at(Path binary) {
        Objects.requireNonNull(binary, "binary");
        if (!binary.isAbsolute()) {
            throw new IllegalArgumentException("nvidia-modprobe path " + binary + " must be absolute");
        }
        return new NvidiaModprobe(binary.normalize());
    }

    /** @return the helper's path */
    public Path binary() {
        return binary;
    }

    /**
     * @return why root must not run the helper (missing, not a regular file, owned by or writable by someone other
     *         than root, or under a directory that is), or empty when it may
     */
    public Optional<String> untrusted() {
        Path real;
        try {
            real = binary.toRealPath();
        } catch (IOException e) {
            return Optional.of(binary + " cannot be resolved (" + e.getMessage() + ")");
        }
        if (!Files.isRegularFile(real, LinkOption.NOFOLLOW_LINKS)) {
            return Optional.of(real + " is not a regular file");
        }
        List<Path> checked = new ArrayList<>();
        for (Path start : List.of(real, binary)) {
            for (Path p = start; p != null; p = p.getParent()) {
                if (checked.contains(p)) {
                    continue;
                }
                checked.add(p);
                Optional<String> why = unsafe(p, p.equals(real));
                if (why.isPresent()) {
                    return why;
                }
            }
        }
        return Optional.empty();
    }

    private static Optional<String> unsafe(Path p, boolean file) {
        int uid;
        int mode;
        try {
            uid = (Integer) Files.getAttribute(p, "unix:uid", LinkOption.NOFOLLOW_LINKS);
            mode = (Integer) Files.getAttribute(p, "unix:mode", LinkOption.NOFOLLOW_LINKS);
        } catch (IOException | UnsupportedOperationException | IllegalArgumentException e) {
            return Optional.of("cannot read the owner and mode of " + p + " (" + e.getMessage() + ")");
        }
        if (uid != 0) {
            return Optional.of(p + " is owned by uid " + uid + ", not root");
        }
        boolean othersWrite = (mode & 0022) != 0;
        boolean link = Files.isSymbolicLink(p);
        if (othersWrite && !link && (file || (mode & STICKY) == 0)) {
            return Optional.of(p + " is writable by its group or others (mode " + Integer.toOctalString(mode & 07777)
                    + ")");
        }
        return Optional.empty();
    }

    /**
     * What one run did.
     *
     * @param ran      whether the helper was started
     * @param exitCode its exit status, when it ended in time
     * @param output   what it printed (the first 4 KiB, stdout and stderr together)
     * @param summary  one line for notes and logs
     */
    public record Result(boolean ran, OptionalInt exitCode, String output, String summary) {
        /** @return whether it ran and exited 0 */
        public boolean succeeded() {
            return ran && exitCode.isPresent() && exitCode.getAsInt() == 0;
        }
    }

    /**
     * Runs {@code nvidia-modprobe -u -c=0}, when root may.
     *
     * @param timeout how long it may run before it is killed
     * @return what happened; never throws
     */
    public Result loadUvm(Duration timeout) {
        String command = binary + " " + String.join(" ", UVM_ARGUMENTS);
        Optional<String> refused = untrusted();
        if (refused.isPresent()) {
            return new Result(false, OptionalInt.empty(), "", command + " not run: " + refused.get());
        }
        List<String> argv = new ArrayList<>(List.of(binary.toString()));
        argv.addAll(UVM_ARGUMENTS);
        ProcessBuilder pb = new ProcessBuilder(argv).redirectErrorStream(true)
                .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")));
        pb.environment().clear();
        pb.environment().put("PATH", "/usr/sbin:/usr/bin:/sbin:/bin");
        Process p;
        try {
            p = pb.start();
        } catch (IOException e) {
            return new Result(false, OptionalInt.empty(), "", command + " could not start: " + e.getMessage());
        }
        ByteArrayOutputStream kept = new ByteArrayOutputStream();
        Thread reader = new Thread(() -> drain(p.getInputStream(), kept), "gpusched-nvidia-modprobe-output");
        reader.setDaemon(true);
        reader.start();
        try {
            if (!p.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
                p.destroyForcibly();
                p.waitFor(2, TimeUnit.SECONDS);
                return new Result(true, OptionalInt.empty(), output(reader, kept), command + " did not end within "
                        + timeout.toMillis() + " ms and was killed");
            }
        } catch (InterruptedException e) {
            p.destroyForcibly();
            Thread.currentThread().interrupt();
            return new Result(true, OptionalInt.empty(), "", command + " was interrupted");
        }
        String out = output(reader, kept);
        int exit = p.exitValue();
        return new Result(true, OptionalInt.of(exit), out, command + " exited " + exit
                + (out.isBlank() ? "" : ": " + out.strip().replace('\n', ' ')));
    }

    private static void drain(InputStream in, ByteArrayOutputStream kept) {
        byte[] buf = new byte[1024];
        try (in) {
            for (int n; (n = in.read(buf)) >= 0;) {
                synchronized (kept) {
                    kept.write(buf, 0, Math.max(0, Math.min(n, KEEP_OUTPUT - kept.size())));
                }
            }
        } catch (IOException e) {
            // the process is gone: what was read is kept
        }
    }

    private static String output(Thread reader, ByteArrayOutputStream kept) {
        try {
            reader.join(1000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        synchronized (kept) {
            return kept.toString(StandardCharsets.UTF_8);
        }
    }

    @Override
    public String toString() {
        return "NvidiaModprobe[" + binary + "]";
    }
}
