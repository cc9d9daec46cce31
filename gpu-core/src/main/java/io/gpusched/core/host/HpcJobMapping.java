package io.gpusched.core.host;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuConfigException;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuVendor;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFileAttributes;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Pattern;

/**
 * dcgm-exporter's HPC job-mapping directory, written for this node's gpusched allocations, so that dcgm-exporter
 * ({@code --hpc-job-mapping-dir DIR}, or {@code DCGM_HPC_JOB_MAPPING_DIR}) labels each GPU's series with the jobs
 * holding it ({@code hpc_job}). One file per held NVIDIA GPU, named by its NVML index ({@code 0}, {@code 1}, ...) or,
 * for a MIG device, {@code <gpu>.<GPU instance id>} (dcgm-exporter reads names matching {@code ^\d+(\.\d+)?$}),
 * holding the job ids of the allocations on it, one per line, sorted: an allocation's {@code jobId} where it is a plain
 * token ({@value #JOB_ID_PATTERN}, so no job id can add a line or a label of its own), else its allocation id. A GPU
 * nobody holds has no file.
 *
 * <p>Each {@link #sync} writes what changed: a file is written whole to a temporary file in the directory, forced to
 * disk and renamed over the old one (a reader sees the old content or the new, never a part), and files of GPUs no
 * longer held are removed; files whose names are not mapping names are left alone. The directory must be a real
 * directory (not a symbolic link), owned by this process's user or root and writable by its owner only: anyone else
 * who could write it could label a GPU's metrics with any job. One writer per node: the node's accounting sampler.
 */
public final class HpcJobMapping {
    /** Names dcgm-exporter reads as mapping files. */
    public static final Pattern FILE_NAME = Pattern.compile("^\\d+(\\.\\d+)?$");
    /** Job ids written as given; any other is replaced by the allocation id. */
    public static final String JOB_ID_PATTERN = "[A-Za-z0-9][A-Za-z0-9._:@+-]{0,127}";

    private static final Pattern JOB_ID = Pattern.compile(JOB_ID_PATTERN);
    private static final String TEMP_PREFIX = ".gpusched-jobmap-";

    private final Path dir;
    /** file name to content, as last written (the directory's, read when opened) */
    private final Map<String, String> written = new HashMap<>();

    private HpcJobMapping(Path dir) {
        this.dir = dir;
    }

    /**
     * Opens (creating it, mode 0755, when absent) a job-mapping directory, removes temporary files a killed writer
     * left, and reads the mapping files it holds.
     *
     * @param dir the directory ({@code gpu.accounting.hpc_job_mapping_dir})
     * @throws GpuConfigException when it is a symbolic link, not a directory, owned by another user than this
     *                            process's or root, or writable by its group or others; or cannot be created or read
     */
    public static HpcJobMapping open(Path dir) {
        Objects.requireNonNull(dir, "dir");
        Path abs = dir.toAbsolutePath().normalize();
        if (!Files.exists(abs, LinkOption.NOFOLLOW_LINKS)) {
            try {
                Files.createDirectories(abs);
                Files.setPosixFilePermissions(abs, PosixFilePermissions.fromString("rwxr-xr-x"));
            } catch (IOException | UnsupportedOperationException e) {
                throw new GpuConfigException("cannot create the HPC job-mapping directory " + abs + ": " + e, e);
            }
        }
        check(abs);
        HpcJobMapping m = new HpcJobMapping(abs);
        try (DirectoryStream<Path> files = Files.newDirectoryStream(abs)) {
            for (Path f : files) {
                String name = f.getFileName().toString();
                if (name.startsWith(TEMP_PREFIX)) {
                    Files.deleteIfExists(f);
                } else if (FILE_NAME.matcher(name).matches()) {
                    m.written.put(name, null); // unknown content: rewritten or removed by the first sync
                }
            }
        } catch (IOException e) {
            throw new GpuConfigException("cannot read the HPC job-mapping directory " + abs + ": " + e, e);
        }
        return m;
    }

    /** @throws GpuConfigException when {@code dir} is not a directory only its owner (this user or root) may write */
    private static void check(Path dir) {
        PosixFileAttributes a;
        int owner;
        int me;
        try {
            a = Files.readAttributes(dir, PosixFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
            owner = (Integer) Files.getAttribute(dir, "unix:uid", LinkOption.NOFOLLOW_LINKS);
            me = (Integer) Files.getAttribute(Path.of("/proc/self"), "unix:uid");
        } catch (IOException | UnsupportedOperationException | IllegalArgumentException e) {
            throw new GpuConfigException("cannot read the HPC job-mapping directory " + dir + ": " + e, e);
        }
        if (a.isSymbolicLink()) {
            throw new GpuConfigException("the HPC job-mapping directory " + dir + " is a symbolic link; give the"
                    + " directory itself (a link may be turned to any directory)");
        }
        if (!a.isDirectory()) {
            throw new GpuConfigException("the HPC job-mapping directory " + dir + " is not a directory");
        }
        if (owner != me && owner != 0) {
            throw new GpuConfigException("the HPC job-mapping directory " + dir + " is owned by uid " + owner
                    + ", not by this process's user (uid " + me + ") or root: its owner could label any GPU with any"
                    + " job; run chown " + me + " " + dir);
        }
        if (a.permissions().contains(PosixFilePermission.GROUP_WRITE)
                || a.permissions().contains(PosixFilePermission.OTHERS_WRITE)) {
            throw new GpuConfigException("the HPC job-mapping directory " + dir + " is writable by "
                    + (a.permissions().contains(PosixFilePermission.OTHERS_WRITE) ? "other users" : "its group")
                    + " (mode " + PosixFilePermissions.toString(a.permissions()) + "): they could label any GPU with"
                    + " any job; run chmod go-w " + dir);
        }
    }

    /** @return the directory */
    public Path directory() {
        return dir;
    }

    /**
     * @param d a device
     * @return its mapping file's name: the NVML index ({@code nvml.index}, else {@code nvidia_smi.index}, else the
     *         device index) of a whole NVIDIA
     *         GPU, {@code <parent NVML index>.<GPU instance id>} of a MIG device; empty for other vendors and a
     *         partition whose GPU instance is not known
     */
    public static Optional<String> fileName(GpuDevice d) {
        if (d.vendor() != GpuVendor.NVIDIA) {
            return Optional.empty();
        }
        // a MIG device names its GPU by the backend's index of it: NVML's, or nvidia-smi's (review53: the nvidia-smi
        // backend's partitions were named after their own gpusched index)
        String gpu = d.properties().getOrDefault("nvml.index", d.properties().getOrDefault("nvidia_smi.index",
                Integer.toString(d.index())));
        if (!gpu.matches("[0-9]{1,4}")) {
            return Optional.empty();
        }
        if (d.parentUuid().isEmpty()) {
            return Optional.of(gpu);
        }
        String gi = d.properties().get("mig.gpu_instance_id");
        return gi != null && gi.matches("[0-9]{1,4}") ? Optional.of(gpu + "." + gi) : Optional.empty();
    }

    /** @return the id written for an allocation: its job id where it is a plain token, else its allocation id */
    public static String jobIdOf(Allocation a) {
        return a.request().jobId().filter(j -> JOB_ID.matcher(j).matches()).orElse(a.id());
    }

    /** @return the mapping the allocations imply: file name to content */
    public static Map<String, String> mappingOf(Collection<Allocation> live) {
        Map<String, TreeSet<String>> jobs = new TreeMap<>();
        for (Allocation a : live) {
            for (GpuDevice d : a.devices()) {
                fileName(d).ifPresent(f -> jobs.computeIfAbsent(f, k -> new TreeSet<>()).add(jobIdOf(a)));
            }
        }
        Map<String, String> out = new TreeMap<>();
        jobs.forEach((f, ids) -> out.put(f, String.join("\n", ids) + "\n"));
        return out;
    }

    /**
     * Brings the directory in step with the live allocations: writes the files whose content changed, removes those of
     * GPUs no longer held.
     *
     * @param live the node's live allocations
     * @throws UncheckedIOException when a file cannot be written or removed (what was done stays done; the next sync
     *                              tries the rest again)
     * @throws GpuConfigException   when the directory is no longer one only its owner may write (replaced by a link)
     */
    public synchronized void sync(Collection<Allocation> live) {
        Map<String, String> want = mappingOf(live);
        boolean changed = !want.equals(written);
        if (!changed) {
            return;
        }
        check(dir);
        for (Map.Entry<String, String> e : want.entrySet()) {
            if (!e.getValue().equals(written.get(e.getKey()))) {
                write(e.getKey(), e.getValue());
                written.put(e.getKey(), e.getValue());
            }
        }
        for (String name : List.copyOf(written.keySet())) {
            if (!want.containsKey(name)) {
                try {
                    Files.deleteIfExists(dir.resolve(name));
                } catch (IOException e) {
                    throw new UncheckedIOException("cannot remove " + dir.resolve(name), e);
                }
                written.remove(name);
            }
        }
    }

    private void write(String name, String content) {
        Path tmp = null;
        try {
            tmp = Files.createTempFile(dir, TEMP_PREFIX, ".tmp"); // O_EXCL, 0600: nothing of anyone else's
            try (FileChannel ch = FileChannel.open(tmp, StandardOpenOption.WRITE, LinkOption.NOFOLLOW_LINKS)) {
                ByteBuffer b = ByteBuffer.wrap(content.getBytes(StandardCharsets.US_ASCII));
                while (b.hasRemaining()) {
                    ch.write(b);
                }
                ch.force(true);
            }
            Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString("rw-r--r--"));
            Files.move(tmp, dir.resolve(name), StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            tmp = null;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write the job-mapping file " + dir.resolve(name), e);
        } finally {
            if (tmp != null) {
                try {
                    Files.deleteIfExists(tmp);
                } catch (IOException | RuntimeException ignored) {
                    // best effort: open() removes leftovers
                }
            }
        }
    }

    /** @return the file names this writer last wrote, with their content (null: found at open, not yet rewritten) */
    public synchronized Map<String, String> written() {
        return new TreeMap<>(written);
    }

    @Override
    public String toString() {
        return "HpcJobMapping[" + dir + "]";
    }
}
