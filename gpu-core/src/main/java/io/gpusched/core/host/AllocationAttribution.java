package io.gpusched.core.host;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.HolderProcess;
import io.gpusched.core.ProcessAttribution;
import io.gpusched.core.SharingMode;
import io.gpusched.core.UsageOwner;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * gpusched's own rule for charging a process on a GPU to one of the allocations holding that GPU, first match wins:
 * <ol>
 *   <li>the process's cgroup (any line of {@code /proc/<pid>/cgroup}; a cgroup2 line read against where cgroup2 is
 *       mounted, {@link CgroupMounts}) is the allocation's job cgroup
 *       ({@link io.gpusched.core.GpuRequest#jobCgroup()}) or below it, the deepest such job cgroup where they nest;
 *       </li>
 *   <li>the process is the allocation's holder ({@link io.gpusched.core.GpuRequest#holder()}: the pid with the
 *       kernel's start time recorded, so a reused pid is not mistaken for it) or a descendant of it (parents followed
 *       through {@code /proc/<pid>/stat}, at most {@value #MAX_ANCESTORS} steps), the nearest holder it runs
 *       under;</li>
 *   <li>the device has exactly one holder and it holds the device exclusively: every process on it is that
 *       allocation's.</li>
 * </ol>
 * Nothing else: a process on a shared GPU that none of these rules ties to a holder is not charged to anyone (a
 * guess would put one user's work on another's bill), nor is one the first two rules tie to several allocations at
 * once (one job cgroup, or one holder process, for two of them): the order the holders are listed in must not decide
 * (review54).
 */
public final class AllocationAttribution implements ProcessAttribution {
    /** Most parent steps followed from a process towards a holder. */
    public static final int MAX_ANCESTORS = 64;

    /** Most processes whose handle {@link #incarnation} keeps open (the least recently asked is closed first). */
    static final int MAX_KEPT = 512;

    private final Path procRoot;
    private final Path cgroupRoot;
    /** the cgroup mounts ({@link #v2Mount}), read once */
    private CgroupMounts v2Mount;
    /** whether {@link #procRoot} is the kernel's procfs (its open files stay bound to their process) */
    private final boolean procfs;
    /**
     * Per pid whose start time was read on the kernel's procfs: an open {@code /proc/<pid>/oom_score_adj} of that
     * process, and its start time. A procfs file stays bound to the process it was opened on: once that process is
     * reaped, reading it fails ({@code ESRCH}) even when another process has taken the pid. So while a read of the
     * kept file succeeds, the pid is still the same process and its start time stands: one {@code pread} instead of an
     * open, a read of {@code stat} (which the kernel formats) and a close. Access-ordered, at most {@link #MAX_KEPT};
     * guarded by itself.
     */
    private final LinkedHashMap<Integer, Kept> kept = new LinkedHashMap<>(16, 0.75f, true);
    private final ByteBuffer probe = ByteBuffer.allocate(32);

    /**
     * Per pid, the token of the last process kept there that is known to be gone (its kept file stopped reading):
     * a process that has the pid now with the same start tick is another one. Access-ordered, at most
     * {@link #MAX_KEPT}; guarded by {@link #kept}.
     */
    private final LinkedHashMap<Integer, Long> gone = new LinkedHashMap<>(16, 0.75f, true);
    /**
     * Added to a start time for a process that took a pid within the start tick of one gone from it: start times are
     * ticks since boot, far below this (5,000 years at 100 Hz).
     */
    static final long GENERATION = 1L << 44;

    /** @param token the process's start time, or a later generation of it ({@link #GENERATION}) */
    private record Kept(FileChannel handle, long token) {
    }

    private AllocationAttribution(Path procRoot, Path cgroupRoot, boolean procfs) {
        this.procRoot = Objects.requireNonNull(procRoot, "procRoot");
        this.cgroupRoot = Objects.requireNonNull(cgroupRoot, "cgroupRoot");
        this.procfs = procfs;
    }

    /** @return the rule over this host's {@code /proc} and {@code /sys/fs/cgroup} */
    public static AllocationAttribution host() {
        return new AllocationAttribution(Path.of("/proc"), Path.of("/sys/fs/cgroup"), true);
    }

    /**
     * @param procRoot   a {@code /proc} tree (tests)
     * @param cgroupRoot where cgroups are mounted ({@code /sys/fs/cgroup}: cgroup v2 there, v1 controllers below it)
     * @return the rule over those trees
     */
    public static AllocationAttribution of(Path procRoot, Path cgroupRoot) {
        return new AllocationAttribution(procRoot, cgroupRoot, false);
    }

    /**
     * @return the process's start time ({@code /proc/<pid>/stat}): a reused pid has another, and a process that took
     *         the pid within the start tick of one this instance saw go has a later generation of it
     *         ({@link #GENERATION}); {@link #NO_PROCESS} when {@code /proc} shows no process with the pid (what
     *         {@link #ownerOf} answered then stands until one does)
     */
    @Override
    public OptionalLong incarnation(int pid) {
        if (!procfs || pid < 1) {
            OptionalLong t = HolderProcess.startTime(pid, procRoot);
            return t.isPresent() ? t : OptionalLong.of(NO_PROCESS);
        }
        synchronized (kept) {
            Kept k = kept.get(pid);
            if (k != null) {
                if (readable(k.handle)) {
                    return OptionalLong.of(k.token); // the same process: the kept file still reads
                }
                kept.remove(pid);
                close(k.handle);
                gone.put(pid, k.token);
                if (gone.size() > MAX_KEPT) {
                    gone.remove(gone.keySet().iterator().next());
                }
            }
        }
        // the handle first, then the start time, then the handle again: a start time read while the handle's process
        // still ran is that process's (a pid is not given to another process before its holder is reaped)
        FileChannel handle = open(pid);
        OptionalLong t = HolderProcess.startTime(pid, procRoot);
        if (t.isEmpty()) {
            if (handle != null) {
                close(handle);
            }
            return OptionalLong.of(NO_PROCESS);
        }
        synchronized (kept) {
            long token = t.getAsLong();
            Long dead = gone.get(pid);
            if (dead != null && (dead & (GENERATION - 1)) == token) {
                // the start tick (10 ms) of a process known to be gone from this pid: another process took the pid
                // within the tick, and must not pass for it (review40)
                token = dead + GENERATION;
            } else if (dead != null) {
                gone.remove(pid);
            }
            if (handle != null) {
                if (readable(handle)) {
                    Kept was = kept.put(pid, new Kept(handle, token));
                    if (was != null) {
                        close(was.handle);
                    }
                    if (kept.size() > MAX_KEPT) {
                        Iterator<Kept> eldest = kept.values().iterator();
                        close(eldest.next().handle);
                        eldest.remove();
                    }
                } else {
                    close(handle);
                }
            }
            return OptionalLong.of(token);
        }
    }

    /** @return how many process handles {@link #incarnation} keeps open (tests) */
    int keptHandles() {
        synchronized (kept) {
            return kept.size();
        }
    }

    private FileChannel open(int pid) {
        try {
            return FileChannel.open(procRoot.resolve(Integer.toString(pid)).resolve("oom_score_adj"),
                    StandardOpenOption.READ);
        } catch (IOException | RuntimeException e) {
            return null; // no such process (or not visible to this user): nothing kept
        }
    }

    /** Called holding {@link #kept}. */
    private boolean readable(FileChannel handle) {
        try {
            probe.clear();
            return handle.read(probe, 0) > 0;
        } catch (IOException | RuntimeException e) {
            return false;
        }
    }

    private static void close(FileChannel handle) {
        try {
            handle.close();
        } catch (IOException e) {
            // a read-only procfs file: nothing was written that a failed close could lose
        }
    }

    @Override
    public Optional<UsageOwner> ownerOf(GpuDevice device, int pid, List<Allocation> holders) {
        if (holders.isEmpty()) {
            return Optional.empty();
        }
        // the job cgroup the process is in, the deepest where job cgroups nest; two allocations of one job cgroup:
        // nothing tells whose the process is (the holders' order must not: review54)
        List<String> cgroups = null;
        String inJob = null;
        int depth = -1;
        boolean tie = false;
        for (Allocation a : holders) {
            Optional<String> job = a.request().jobCgroup();
            if (job.isPresent()) {
                if (cgroups == null) {
                    cgroups = cgroupPaths(pid);
                }
                Optional<String> in = jobIn(cgroups, job.get());
                if (in.isPresent()) {
                    // depth in the cgroup hierarchy, not in the file system: one cgroup may have several names (bind
                    // mounts, a container's subtree), and the same cgroup for two allocations is a tie (review58)
                    int d = (int) in.get().chars().filter(c -> c == '/').count();
                    if (d > depth) {
                        inJob = a.id();
                        depth = d;
                        tie = false;
                    } else if (d == depth && !a.id().equals(inJob)) {
                        tie = true;
                    }
                }
            }
        }
        if (inJob != null) {
            return tie ? Optional.empty() : Optional.of(UsageOwner.allocation(inJob));
        }
        // the nearest holder the process runs under (itself, its parent, ...); one process holding several of the
        // device's allocations: nothing tells whose the process is (review54: the first listed was charged)
        List<Long> lineage = null;
        for (Allocation a : holders) {
            if (a.request().holder().isPresent()) {
                lineage = lineage(pid);
                break;
            }
        }
        if (lineage != null) {
            for (long p : lineage) {
                String found = null;
                for (Allocation a : holders) {
                    Optional<HolderProcess> h = a.request().holder();
                    if (h.isPresent() && h.get().pid() == p && h.get().isAlive(procRoot)) {
                        if (found != null && !found.equals(a.id())) {
                            return Optional.empty();
                        }
                        found = a.id();
                    }
                }
                if (found != null) {
                    return Optional.of(UsageOwner.allocation(found));
                }
            }
        }
        if (holders.size() == 1 && holders.get(0).sharing() == SharingMode.EXCLUSIVE) {
            return Optional.of(UsageOwner.allocation(holders.get(0).id()));
        }
        return Optional.empty();
    }

    /** @return each cgroup path line of {@code /proc/<pid>/cgroup}, as {@code controllers:path} */
    private List<String> cgroupPaths(int pid) {
        List<String> out = new ArrayList<>();
        try {
            // decoded as Java decodes file names, so a job cgroup named outside ASCII matches (review56); leniently:
            // bytes not valid there become U+FFFD and match no job cgroup
            String text = new String(Files.readAllBytes(procRoot.resolve(Integer.toString(pid)).resolve("cgroup")),
                    CgroupMounts.fileNames());
            for (String line : text.split("\n")) {
                int first = line.indexOf(':');
                int second = first < 0 ? -1 : line.indexOf(':', first + 1);
                if (second > 0 && line.startsWith("/", second + 1)) {
                    out.add(line.substring(first + 1));
                }
            }
        } catch (IOException | RuntimeException e) {
            return List.of();
        }
        return out;
    }

    /**
     * @return the job cgroup as its hierarchy names it ({@code <controllers>:<path>}, an empty controllers part for
     *         cgroup2), when one of the process's cgroups is {@code jobCgroup} or below it; the job cgroup's path is
     *         resolved through links first (v1's {@code cpu} and {@code cpuacct} name {@code cpu,cpuacct}: review58)
     */
    private Optional<String> jobIn(List<String> lines, String jobCgroup) {
        Path job;
        try {
            job = Path.of(jobCgroup).normalize();
        } catch (InvalidPathException e) {
            return Optional.empty();
        }
        if (job.startsWith(cgroupRoot)) {
            // only links in the cgroup tree, which root makes (v1's controller aliases): a job cgroup elsewhere that
            // links into another job's would take that job's processes for its own
            try {
                job = job.toRealPath();
            } catch (IOException | RuntimeException e) {
                // gone, or not readable here: its name as given
            }
        }
        CgroupMounts table = v2Mount();
        for (String line : lines) {
            int colon = line.indexOf(':');
            String controllers = line.substring(0, colon);
            String raw = line.substring(colon + 1);
            for (Located l : resolve(table, controllers, raw)) {
                if (l.path().startsWith(job) && job.startsWith(l.point())) {
                    String below = l.point().relativize(job).toString();
                    String root = l.root().equals("/") ? "" : l.root();
                    return Optional.of(controllers + ":" + root + (below.isEmpty() ? "" : "/" + below));
                }
            }
        }
        return Optional.empty();
    }

    /**
     * A process's cgroup as a path of this file system, and the mount it was read below.
     *
     * @param path  the cgroup's directory
     * @param point the mount point
     * @param root  the cgroup directory mounted there, as the hierarchy names it
     */
    private record Located(Path path, Path point, String root) {
    }

    /**
     * @return where a cgroup path of {@code /proc/<pid>/cgroup} lies in this process's file system: below each
     *         mount of its hierarchy (cgroup2, or the v1 mount with its controllers; the last listed at a mount point,
     *         the one seen there) whose root the path is at or below (a container's subtree, or {@code /../..} for the
     *         host's hierarchy seen from a private cgroup namespace: reviews 56, 57); none for a path that is not, or
     *         that climbs above its root ({@code ..}: outside this namespace); with no cgroup mount listed, below the
     *         cgroup root as the layout under it says (cgroup2 at it, v1 controllers below it)
     */
    private List<Located> resolve(CgroupMounts table, String controllers, String raw) {
        List<Located> out = new ArrayList<>();
        if (table.all().isEmpty()) {
            if (hasDotDot(raw)) {
                return out;
            }
            List<Path> mounts = new ArrayList<>();
            if (controllers.isEmpty()) {
                mounts.add(cgroupRoot);
            } else {
                for (String c : controllers.split(",")) {
                    mounts.add(cgroupRoot.resolve(c.startsWith("name=") ? c.substring(5) : c));
                }
                mounts.add(cgroupRoot.resolve(controllers));
            }
            for (Path m : mounts) {
                below(m, raw).ifPresent(p -> out.add(new Located(p, m, "/")));
            }
            return out;
        }
        Map<Path, CgroupMounts.Mount> seen = new LinkedHashMap<>(); // per point, the last listed
        List<String> wanted = controllers.isEmpty() ? List.of() : List.of(controllers.split(","));
        for (CgroupMounts.Mount m : table.all()) {
            // a mount hides every earlier one at its point or below it (review58: cgroup2 mounted over a v1 layout)
            seen.keySet().removeIf(p -> p.startsWith(m.point()));
            if (controllers.isEmpty() ? m.v2() : !m.v2() && m.controllers().containsAll(wanted)) {
                seen.put(m.point(), m);
            }
        }
        for (CgroupMounts.Mount m : seen.values()) {
            String root = m.root();
            String rel;
            if (root.equals("/")) {
                rel = raw;
            } else if (raw.equals(root)) {
                rel = "/";
            } else if (raw.startsWith(root + "/")) {
                rel = raw.substring(root.length());
            } else {
                continue; // not in the part of the hierarchy mounted there
            }
            if (!hasDotDot(rel)) {
                below(m.point(), rel).ifPresent(p -> out.add(new Located(p, m.point(), root)));
            }
        }
        return out;
    }

    private static boolean hasDotDot(String path) {
        return ("/" + path + "/").contains("/../");
    }

    private static Optional<Path> below(Path mount, String rel) {
        try {
            return Optional.of(Path.of(mount + Path.of(rel).normalize().toString()).normalize());
        } catch (InvalidPathException e) {
            return Optional.empty();
        }
    }

    /**
     * @return this process's cgroup mounts, by its {@code mountinfo} under the proc root (read once): cgroup2 at the
     *         cgroup root on a unified host, {@code unified} below it on a hybrid one; none listed: the cgroup root
     */
    private synchronized CgroupMounts v2Mount() {
        if (v2Mount == null) {
            v2Mount = CgroupMounts.read(procRoot.resolve("self").resolve("mountinfo"));
        }
        return v2Mount;
    }

    /** @return the pid and its ancestors' pids, nearest first, at most {@link #MAX_ANCESTORS} + 1 */
    private List<Long> lineage(long pid) {
        List<Long> out = new ArrayList<>();
        long p = pid;
        while (p > 0 && out.size() <= MAX_ANCESTORS && !out.contains(p)) {
            out.add(p);
            p = parentOf(p);
        }
        return out;
    }

    private long parentOf(long pid) {
        try {
            String stat = Files.readString(procRoot.resolve(Long.toString(pid)).resolve("stat"),
                    StandardCharsets.ISO_8859_1);
            int close = stat.lastIndexOf(')');
            if (close < 0) {
                return 0;
            }
            String[] f = stat.substring(close + 1).trim().split("\\s+");
            return f.length > 1 ? Long.parseLong(f[1]) : 0;
        } catch (IOException | RuntimeException e) {
            return 0;
        }
    }
}
