package io.gpusched.core.host;

import io.gpusched.core.GpuScheduler;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.AccessDeniedException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * A job's cgroup, as every host that runs jobs on allocated GPUs makes it ({@code gpusched run}, the node service): a
 * directory {@code job-<allocation id>} under a parent cgroup, fenced to the allocation's GPUs, recorded in the
 * allocation ({@link GpuScheduler#recordJobCgroup}) before the job starts. The one place that ends such a job:
 * {@link #end} kills every process of the cgroup and of its descendants and removes them, so that a fence's rules (the
 * v2 device program, the v1 {@code devices.*} rules) go with the cgroup. The scheduler calls it when it reclaims an
 * allocation whose holder is gone or whose lease ends it; a host calls it when its job ends, and {@link #cleanStale} at
 * start for cgroups left by a host killed between making a cgroup and recording it.
 *
 * <p>Plain file I/O on cgroupfs, cgroup v1 and v2: {@code cgroup.kill} where the kernel has it (v2, Linux 5.14 and
 * later), else SIGKILL to every pid of {@code cgroup.procs} until none is left. Only a directory named
 * {@code job-<id>} on a cgroup file system, reached without symbolic links, is acted on: a path recorded in the ledger
 * by another process never makes the reclaimer kill anything else.
 */
public final class JobCgroups {
    /** The prefix of a job cgroup's name: {@code job-<allocation id>}. */
    public static final String PREFIX = "job-";

    /** How long {@link #end(Path, String)} waits for a cgroup's processes to die and its directory to go. */
    public static final Duration DEFAULT_TIMEOUT = Duration.ofSeconds(10);

    private static final Pattern ID = Pattern.compile("[A-Za-z0-9][A-Za-z0-9._-]{0,63}");

    private JobCgroups() {
    }

    /**
     * @param allocationId an allocation id
     * @return the name of its job cgroup, {@code job-<id>}
     * @throws IllegalArgumentException when the id is not a plain token (letters, digits, {@code . _ -})
     */
    public static String name(String allocationId) {
        if (allocationId == null || !ID.matcher(allocationId).matches()) {
            throw new IllegalArgumentException("an allocation id is letters, digits, '.', '_' and '-' (at most 64),"
                    + " was \"" + String.valueOf(allocationId).replaceAll("\\p{Cntrl}", "?") + "\"");
        }
        return PREFIX + allocationId;
    }

    /**
     * @param cgroup a directory
     * @return the allocation id its name says it is the job cgroup of, if it is named {@code job-<id>}
     */
    public static Optional<String> allocationId(Path cgroup) {
        Path f = cgroup.getFileName();
        String n = f == null ? "" : f.toString();
        if (!n.startsWith(PREFIX) || !ID.matcher(n.substring(PREFIX.length())).matches()) {
            return Optional.empty();
        }
        return Optional.of(n.substring(PREFIX.length()));
    }

    /**
     * Checks that {@code cgroup} is one this class acts on for {@code allocationId}.
     *
     * @param cgroup       the cgroup directory (absolute)
     * @param allocationId the allocation it is recorded for
     * @return true when it exists, false when it does not (nothing to end)
     * @throws JobCgroupException when it is not named {@code job-<allocationId>}, not absolute and normalized, reached
     *                            through a symbolic link, or not a directory of a cgroup file system
     */
    public static boolean check(Path cgroup, String allocationId) {
        if (!cgroup.isAbsolute() || !cgroup.equals(cgroup.normalize())
                || !allocationId(cgroup).equals(Optional.of(allocationId))) {
            throw new JobCgroupException(cgroup, List.of(), "the job cgroup " + cgroup + " of allocation "
                    + allocationId + " is not an absolute path named " + PREFIX + allocationId + "; gpusched ends"
                    + " only such cgroups (it would otherwise kill whatever another path holds)");
        }
        if (!Files.exists(cgroup, LinkOption.NOFOLLOW_LINKS)) {
            return false;
        }
        Path real;
        String type;
        try {
            real = cgroup.toRealPath();
            type = Files.getFileStore(cgroup).type();
        } catch (NoSuchFileException e) {
            return false;
        } catch (IOException e) {
            throw new JobCgroupException(cgroup, List.of(), "cannot look at the job cgroup " + cgroup + ": " + e);
        }
        if (!type.equals("cgroup2") && !type.equals("cgroup")) {
            throw new JobCgroupException(cgroup, List.of(), "the job cgroup " + cgroup + " is not on a cgroup file"
                    + " system (it is on " + type + "); gpusched ends only real cgroups");
        }
        if (!real.equals(cgroup)) {
            throw new JobCgroupException(cgroup, List.of(), "the job cgroup " + cgroup + " is reached through a"
                    + " symbolic link (it is " + real + "); gpusched ends only a cgroup named by its own path");
        }
        return true;
    }

    /**
     * Ends the job of {@code allocationId}: kills every process of its cgroup (and of any cgroup below it), then
     * removes them, waiting at most {@link #DEFAULT_TIMEOUT}.
     *
     * @throws JobCgroupException see {@link #end(Path, String, Duration)}
     */
    public static void end(Path cgroup, String allocationId) {
        end(cgroup, allocationId, DEFAULT_TIMEOUT);
    }

    /**
     * Ends the job of {@code allocationId}: kills every process of its cgroup and of every cgroup below it
     * ({@code cgroup.kill}, else SIGKILL to each pid until none is left), then removes the cgroups, deepest first. A
     * cgroup that does not exist is already ended.
     *
     * @param cgroup       the job's cgroup (as {@link #check} accepts)
     * @param allocationId the allocation it was recorded for
     * @param timeout      how long to wait for the processes to die and the directories to go
     * @throws JobCgroupException when it is not a job cgroup ({@link #check}), when this process may not kill its
     *                            processes or remove it (naming the pids and the user), or when processes are left
     *                            after {@code timeout} (such as ones in uninterruptible sleep)
     */
    public static void end(Path cgroup, String allocationId, Duration timeout) {
        kill(cgroup, allocationId, timeout);
        remove(cgroup, allocationId, timeout);
    }

    /**
     * Kills every process of the cgroup and of every cgroup below it and waits until none is left (the first half of
     * {@link #end}; a host revokes its fence between the two).
     *
     * @throws JobCgroupException as {@link #end(Path, String, Duration)}
     */
    public static void kill(Path cgroup, String allocationId, Duration timeout) {
        if (!check(cgroup, allocationId)) {
            return;
        }
        long deadline = System.nanoTime() + timeout.toNanos();
        Path killFile = cgroup.resolve("cgroup.kill");
        boolean killFileWorks = Files.exists(killFile, LinkOption.NOFOLLOW_LINKS);
        for (int round = 0;; round++) {
            List<Long> left = pids(cgroup);
            if (left.isEmpty()) {
                return;
            }
            List<Long> denied = new ArrayList<>();
            if (killFileWorks) {
                try {
                    Files.writeString(killFile, "1", StandardCharsets.US_ASCII, StandardOpenOption.WRITE);
                } catch (AccessDeniedException e) {
                    throw notPermitted(cgroup, left, "writing " + killFile);
                } catch (IOException e) {
                    killFileWorks = false; // an older kernel's file, or an odd one: kill pid by pid
                }
            }
            if (!killFileWorks) {
                for (long pid : left) {
                    Optional<ProcessHandle> h = ProcessHandle.of(pid);
                    if (h.isPresent() && !h.get().destroyForcibly() && h.get().isAlive()) {
                        denied.add(pid);
                    }
                }
                if (!denied.isEmpty() && denied.size() == left.size()) {
                    throw notPermitted(cgroup, left, "SIGKILL to pid " + denied.get(0));
                }
            }
            if (System.nanoTime() - deadline >= 0) {
                throw new JobCgroupException(cgroup, left, "the processes of job cgroup " + cgroup + " (pids "
                        + shown(left) + ") were sent SIGKILL but did not end within " + timeout.toMillis() + " ms (a"
                        + " process in uninterruptible sleep ends only when its I/O does); its GPUs stay held until"
                        + " they end and the cgroup is removed");
            }
            pause(round);
        }
    }

    /**
     * Removes the cgroup and every cgroup below it, deepest first (the second half of {@link #end}); waits up to
     * {@code timeout} for the kernel to let go of processes that just died.
     *
     * @throws JobCgroupException when processes are still in it, or it cannot be removed
     */
    public static void remove(Path cgroup, String allocationId, Duration timeout) {
        if (!check(cgroup, allocationId)) {
            return;
        }
        long deadline = System.nanoTime() + timeout.toNanos();
        for (int round = 0;; round++) {
            IOException last = null;
            for (Path d : deepestFirst(cgroup)) {
                try {
                    Files.deleteIfExists(d);
                } catch (AccessDeniedException e) {
                    throw notPermitted(cgroup, pids(cgroup), "removing " + d);
                } catch (IOException e) {
                    last = e; // busy: a process that just died is still being let go of
                }
            }
            if (!Files.exists(cgroup, LinkOption.NOFOLLOW_LINKS)) {
                return;
            }
            if (System.nanoTime() - deadline >= 0) {
                List<Long> left = pids(cgroup);
                throw new JobCgroupException(cgroup, left, "cannot remove job cgroup " + cgroup + (left.isEmpty()
                        ? "" : " (pids " + shown(left) + " are in it)") + ": " + last);
            }
            pause(round);
        }
    }

    /**
     * @return the pids of the cgroup and of every cgroup below it; empty when it does not exist or is not a directory
     *         of a cgroup file system (nothing else is read: a recorded path may name anything)
     */
    public static List<Long> pids(Path cgroup) {
        List<Long> out = new ArrayList<>();
        if (!onCgroupFs(cgroup)) {
            return out;
        }
        for (Path d : deepestFirst(cgroup)) {
            Path procs = d.resolve("cgroup.procs");
            if (!Files.isRegularFile(procs, LinkOption.NOFOLLOW_LINKS)) {
                continue;
            }
            try {
                for (String line : Files.readAllLines(procs, StandardCharsets.US_ASCII)) {
                    String t = line.strip();
                    if (!t.isEmpty()) {
                        out.add(Long.parseLong(t));
                    }
                }
            } catch (IOException | NumberFormatException e) {
                // gone meanwhile, or not a cgroup: nothing to count
            }
        }
        return out;
    }

    /** @return whether any process is in the cgroup or a cgroup below it */
    public static boolean populated(Path cgroup) {
        return !pids(cgroup).isEmpty();
    }

    /**
     * The job cgroups under {@code parent} that no live allocation uses: named {@code job-<id>} where {@code scheduler}
     * issued the id (another node's cgroups, from another state directory, are left alone) and the allocation is no
     * longer live. Such a cgroup was left by a host killed after it made the cgroup and before it recorded it.
     *
     * @return their directories (none when {@code parent} does not exist)
     */
    public static List<Path> stale(Path parent, GpuScheduler scheduler) {
        List<Path> named = new ArrayList<>();
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(parent)) {
            for (Path d : ds) {
                if (allocationId(d).isPresent() && Files.isDirectory(d, LinkOption.NOFOLLOW_LINKS)) {
                    named.add(d);
                }
            }
        } catch (IOException e) {
            return List.of();
        }
        // asked after the listing, each on the latest ledger: a host makes job-<id> only once <id> is allocated, so a
        // cgroup seen here whose allocation is not live now was left behind (never one being set up meanwhile)
        List<Path> out = new ArrayList<>();
        for (Path d : named) {
            String id = allocationId(d).orElseThrow();
            if (scheduler.issued(id) && scheduler.allocation(id).isEmpty()) {
                out.add(d);
            }
        }
        Collections.sort(out);
        return out;
    }

    /**
     * Ends every {@link #stale} job cgroup under {@code parent}.
     *
     * @return what could not be ended (one sentence each); empty when all were
     */
    public static List<String> cleanStale(Path parent, GpuScheduler scheduler) {
        List<String> problems = new ArrayList<>();
        for (Path d : stale(parent, scheduler)) {
            try {
                end(d, allocationId(d).orElseThrow());
            } catch (JobCgroupException e) {
                problems.add(e.getMessage());
            }
        }
        return problems;
    }

    private static boolean onCgroupFs(Path dir) {
        try {
            if (!Files.isDirectory(dir, LinkOption.NOFOLLOW_LINKS)) {
                return false;
            }
            String type = Files.getFileStore(dir).type();
            return type.equals("cgroup2") || type.equals("cgroup");
        } catch (IOException | SecurityException e) {
            return false;
        }
    }

    private static List<Path> deepestFirst(Path cgroup) {
        List<Path> out = new ArrayList<>();
        collect(cgroup, out, 0);
        return out;
    }

    private static void collect(Path dir, List<Path> out, int depth) {
        if (depth > 64) {
            return;
        }
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(dir)) {
            for (Path d : ds) {
                if (Files.isDirectory(d, LinkOption.NOFOLLOW_LINKS)) {
                    collect(d, out, depth + 1);
                }
            }
        } catch (IOException e) {
            if (!Files.isDirectory(dir, LinkOption.NOFOLLOW_LINKS)) {
                return;
            }
        }
        out.add(dir);
    }

    private static JobCgroupException notPermitted(Path cgroup, List<Long> pids, String step) {
        return new JobCgroupException(cgroup, pids, "not permitted to end job cgroup " + cgroup + " (pids "
                + shown(pids) + ") as uid " + uid() + ": " + step + " was refused; its GPUs stay held until root or"
                + " the job's owner ends it (kill the pids, or write 1 to its cgroup.kill) and removes the cgroup");
    }

    private static String uid() {
        try {
            return String.valueOf(Files.getAttribute(Path.of("/proc/self"), "unix:uid"));
        } catch (IOException | UnsupportedOperationException | IllegalArgumentException e) {
            return "?";
        }
    }

    private static String shown(List<Long> pids) {
        List<Long> first = pids.subList(0, Math.min(8, pids.size()));
        return first.toString().replace("[", "").replace("]", "") + (pids.size() > 8 ? ", ..." : "");
    }

    private static void pause(int round) {
        try {
            Thread.sleep(Math.min(50, 1 + round * 2L));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new JobCgroupException(Path.of("/"), List.of(), "interrupted while ending a job cgroup");
        }
    }
}
