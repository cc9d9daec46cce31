package io.gpusched.core;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * The process an allocation is bound to: its pid plus the kernel's start time for that pid (field 22 of
 * {@code /proc/<pid>/stat}, clock ticks since boot), so that a pid the kernel has reused for another process is not
 * mistaken for the holder. An allocation bound to a holder is reclaimed once the holder is gone.
 *
 * @param pid       process id, at least 1
 * @param startTime start time in clock ticks since boot, as {@code /proc/<pid>/stat} reports it
 */
public record HolderProcess(long pid, long startTime) {

    /** @throws IllegalArgumentException if the pid is not positive or the start time negative */
    public HolderProcess {
        if (pid < 1) {
            throw new IllegalArgumentException("holder pid must be >= 1, was " + pid);
        }
        if (startTime < 0) {
            throw new IllegalArgumentException("holder start time must be >= 0, was " + startTime);
        }
    }

    /** @return this JVM's process */
    public static HolderProcess current() {
        return of(ProcessHandle.current().pid());
    }

    /**
     * @param pid a running process
     * @return that process with its start time read from {@code /proc}
     * @throws IllegalArgumentException if no such process is running (or {@code /proc} cannot tell)
     */
    public static HolderProcess of(long pid) {
        return of(pid, Path.of("/proc"));
    }

    /** Like {@link #of(long)} with another {@code /proc} root (tests). */
    public static HolderProcess of(long pid, Path procRoot) {
        return startTimeOf(pid, procRoot).map(t -> new HolderProcess(pid, t))
                .orElseThrow(() -> new IllegalArgumentException("process " + pid + " is not running (no readable "
                        + procRoot.resolve(Long.toString(pid)).resolve("stat") + ")"));
    }

    /**
     * @return true if a process with this pid runs now and started at this holder's start time; a process that has
     *         exited but is not yet reaped by its parent (a zombie, state {@code Z} or {@code X}) is not alive
     */
    public boolean isAlive() {
        return isAlive(Path.of("/proc"));
    }

    /** Like {@link #isAlive()} with another {@code /proc} root (tests). */
    public boolean isAlive(Path procRoot) {
        return startTimeOf(pid, procRoot).map(t -> t == startTime).orElse(false) && !exited(pid, procRoot);
    }

    /**
     * Whether this holder is certainly gone, for an allocation of {@code owner}: not {@link #isAlive() alive}, and
     * not merely hidden. Where {@code /proc} is mounted {@code hidepid=1} or {@code 2} and this process is not root,
     * other users' processes cannot be seen, so a holder that cannot be seen is gone only when it would be this
     * user's own (the allocation's owner uid, else its owner name, is this process's user); another user's is kept
     * (root, or that user, reclaims it once it is really gone).
     */
    boolean isGoneFor(Optional<String> owner, OptionalLong ownerUid) {
        if (isAlive()) {
            return false;
        }
        if (Files.isReadable(Path.of("/proc", Long.toString(pid), "stat")) || !ProcView.hidesOthers()) {
            return true;
        }
        if (ownerUid.isPresent()) {
            return ownerUid.getAsLong() == ProcView.UID;
        }
        return owner.isPresent() && owner.get().equals(System.getProperty("user.name"));
    }

    /** What this process sees of {@code /proc}: its uid read once, the mount's options each time (a remount). */
    private static final class ProcView {
        static final long UID = uid();

        static boolean hidesOthers() {
            return UID != 0 && hidepid(Path.of("/proc/self/mountinfo"));
        }

        private static long uid() {
            try {
                return ((Number) Files.getAttribute(Path.of("/proc/self"), "unix:uid")).longValue();
            } catch (IOException | RuntimeException e) {
                return -1;
            }
        }
    }

    /**
     * @return whether the {@code /proc} mount (the last one listed on {@code /proc}, the one on top) hides other
     *     users' processes: a {@code hidepid} option other than {@code 0}/{@code off}
     */
    static boolean hidepid(Path mountinfo) {
        boolean hides = false;
        try {
            for (String line : Files.readAllLines(mountinfo, StandardCharsets.UTF_8)) {
                String[] f = line.split(" ");
                int dash = line.indexOf(" - ");
                if (f.length < 5 || dash < 0 || !f[4].equals("/proc")) {
                    continue;
                }
                String[] after = line.substring(dash + 3).split(" ");
                hides = false;
                if (after.length >= 3 && after[0].equals("proc")) {
                    for (String o : after[2].split(",")) {
                        if (o.startsWith("hidepid=") && !o.equals("hidepid=0") && !o.equals("hidepid=off")) {
                            hides = true;
                        }
                    }
                }
            }
        } catch (IOException | RuntimeException e) {
            return false;
        }
        return hides;
    }

    /** @return true if {@code /proc/<pid>/stat} shows an exited process (zombie {@code Z} or dead {@code X}) */
    private static boolean exited(long pid, Path procRoot) {
        try {
            String stat = Files.readString(procRoot.resolve(Long.toString(pid)).resolve("stat"),
                    StandardCharsets.ISO_8859_1);
            int close = stat.lastIndexOf(')');
            String rest = close < 0 ? "" : stat.substring(close + 1).trim();
            return rest.startsWith("Z") || rest.startsWith("X");
        } catch (IOException | RuntimeException e) {
            return true;
        }
    }

    /**
     * @param pid      a pid of this host
     * @param procRoot a {@code /proc} tree
     * @return the kernel's start time of the process that has the pid now (clock ticks since boot), which no later
     *         process given the same pid has; empty when none runs (or {@code /proc} cannot tell)
     */
    public static OptionalLong startTime(long pid, Path procRoot) {
        Optional<Long> t = startTimeOf(pid, procRoot);
        return t.isPresent() ? OptionalLong.of(t.get()) : OptionalLong.empty();
    }

    /**
     * Reads field 22 (starttime) of {@code /proc/<pid>/stat}. The command name (field 2) may hold spaces and
     * parentheses, so fields are counted after the last {@code ')'}.
     */
    static Optional<Long> startTimeOf(long pid, Path procRoot) {
        if (pid < 1) {
            return Optional.empty();
        }
        String stat;
        try {
            stat = Files.readString(procRoot.resolve(Long.toString(pid)).resolve("stat"), StandardCharsets.ISO_8859_1);
        } catch (IOException | RuntimeException e) {
            return Optional.empty();
        }
        int close = stat.lastIndexOf(')');
        if (close < 0) {
            return Optional.empty();
        }
        String[] f = stat.substring(close + 1).trim().split("\\s+");
        // after ")": f[0] is field 3 (state), so field 22 is f[19]
        if (f.length < 20) {
            return Optional.empty();
        }
        try {
            long t = Long.parseLong(f[19]);
            return t >= 0 ? Optional.of(t) : Optional.empty();
        } catch (NumberFormatException e) {
            return Optional.empty();
        }
    }

    @Override
    public String toString() {
        return "pid " + pid + " (started at tick " + startTime + ")";
    }
}
