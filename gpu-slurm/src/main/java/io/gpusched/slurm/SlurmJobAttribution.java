package io.gpusched.slurm;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.ProcessAttribution;
import io.gpusched.core.UsageOwner;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * Charges a process on a GPU to the Slurm job it runs in, read from {@code /proc/<pid>/cgroup} by
 * {@link SlurmJobStep#fromProcCgroup}: on a Slurm node the GPUs are Slurm's, not gpusched's, so this source comes after
 * gpusched's own ({@code AllocationAttribution.host().orElse(SlurmJobAttribution.host())}). The owner is
 * {@link UsageOwner.Kind#SLURM_JOB} with the job id as its id and labels {@code step}, {@code uid} (cgroup v1's path,
 * or the process's owner), {@code user} (the process's owner, by name) and {@code cgroup} ({@code v1} or {@code v2}).
 *
 * <p>The pid is the driver's, in the host's pid namespace: the host's {@code /proc} must be the one read (a
 * containerised sampler mounts it). What is read is bounded: a file that is not a regular file (a FIFO, a link to
 * {@code /dev/zero} in a tree that is not the kernel's) is not opened, and at most {@value SlurmJobStep#MAX_INPUT}
 * bytes are read.
 */
public final class SlurmJobAttribution implements ProcessAttribution {
    private final Path procRoot;

    private SlurmJobAttribution(Path procRoot) {
        this.procRoot = Objects.requireNonNull(procRoot, "procRoot");
    }

    /** @return the source over this host's {@code /proc} */
    public static SlurmJobAttribution host() {
        return new SlurmJobAttribution(Path.of("/proc"));
    }

    /** @param procRoot a {@code /proc} tree (tests) @return the source over it */
    public static SlurmJobAttribution of(Path procRoot) {
        return new SlurmJobAttribution(procRoot);
    }

    /**
     * @param pid a process id in the host's pid namespace
     * @return the Slurm job step it runs in, or empty (no such process, not in a Slurm job, unreadable)
     */
    public Optional<SlurmJobStep> jobOf(int pid) {
        if (pid < 1) {
            return Optional.empty();
        }
        Path file = procRoot.resolve(Integer.toString(pid)).resolve("cgroup");
        if (!Files.isRegularFile(file, LinkOption.NOFOLLOW_LINKS)) {
            return Optional.empty();
        }
        byte[] bytes;
        try (InputStream in = Files.newInputStream(file, LinkOption.NOFOLLOW_LINKS)) {
            bytes = in.readNBytes(SlurmJobStep.MAX_INPUT);
        } catch (IOException | RuntimeException e) {
            return Optional.empty(); // the process ended, or the file is not readable
        }
        return SlurmJobStep.fromProcCgroup(new String(bytes, StandardCharsets.ISO_8859_1));
    }

    /** @return true: it names {@link UsageOwner.Kind#SLURM_JOB}s */
    @Override
    public boolean namesOthers() {
        return true;
    }

    @Override
    public Optional<UsageOwner> ownerOf(GpuDevice device, int pid, List<Allocation> holders) {
        return jobOf(pid).map(s -> withUser(owner(s), pid));
    }

    /**
     * @return the owner with the job's user added: labels {@code uid} and {@code user} from the owner of
     *         {@code /proc/<pid>} (a cgroup v2 path names no uid), where it agrees with the uid the path names
     */
    private UsageOwner withUser(UsageOwner o, int pid) {
        Path proc = procRoot.resolve(Integer.toString(pid));
        try {
            long uid = ((Number) Files.getAttribute(proc, "unix:uid", LinkOption.NOFOLLOW_LINKS)).longValue();
            String named = o.labels().get("uid");
            if (named != null && !named.equals(Long.toString(uid))) {
                return o; // a setuid process, or another process took the pid: the path's uid alone
            }
            Map<String, String> labels = new LinkedHashMap<>(o.labels());
            labels.put("uid", Long.toString(uid));
            labels.put("user", Files.getOwner(proc, LinkOption.NOFOLLOW_LINKS).getName());
            return new UsageOwner(o.kind(), o.id(), labels);
        } catch (IOException | RuntimeException e) {
            return o; // the process is gone: as the path names it
        }
    }

    /** @return the usage owner a job step is charged as */
    public static UsageOwner owner(SlurmJobStep s) {
        Map<String, String> labels = new LinkedHashMap<>();
        s.step().ifPresent(st -> labels.put("step", st));
        s.uid().ifPresent(u -> labels.put("uid", Long.toString(u)));
        labels.put("cgroup", "v" + s.cgroupVersion());
        return new UsageOwner(UsageOwner.Kind.SLURM_JOB, Long.toString(s.jobId()), labels);
    }
}
