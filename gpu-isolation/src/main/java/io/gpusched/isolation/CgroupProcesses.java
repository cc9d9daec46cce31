package io.gpusched.isolation;

import com.sun.jna.LastErrorException;
import io.gpusched.isolation.internal.Libc;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The processes of one job cgroup: listed, signalled, ended, and the cgroup removed. A signal goes through a pidfd
 * ({@code pidfd_open}, then a check that the process is still in the cgroup, then {@code pidfd_send_signal}), so a pid
 * that a process outside the cgroup took over meanwhile is never signalled; where the kernel lacks pidfds (before
 * 5.3), through {@code kill(2)}. Ending uses {@code cgroup.kill} where the kernel has it (cgroup v2, 5.14+), else
 * SIGKILL to each process until the cgroup is empty.
 */
final class CgroupProcesses {
    private static final long SYS_PIDFD_SEND_SIGNAL = 424;
    private static final long SYS_PIDFD_OPEN = 434;
    private static final int ESRCH = 3;
    private static final int ENOSYS = 38;

    /** Signal numbers of the names the service passes on (Linux, every architecture gpusched runs on). */
    static final Map<String, Integer> SIGNALS = Map.of("HUP", 1, "INT", 2, "QUIT", 3, "KILL", 9, "USR1", 10,
            "USR2", 12, "TERM", 15);

    private CgroupProcesses() {
    }

    /** @return the signal's number @throws IllegalArgumentException naming the signals that are valid */
    static int signal(String name) {
        String n = name == null ? "" : name.toUpperCase(Locale.ROOT).replaceFirst("^SIG", "");
        Integer s = SIGNALS.get(n);
        if (s == null) {
            throw new IllegalArgumentException("signal \"" + (name == null ? "null" : name.replaceAll("[^\\x20-\\x7e]",
                    "?")) + "\" is not one that can be passed to a job; valid: HUP, INT, QUIT, TERM, KILL, USR1, USR2");
        }
        return s;
    }

    /** @return the pids in the cgroup (empty when it is gone) */
    static List<Long> pids(Path cgroup) {
        List<Long> out = new ArrayList<>();
        try {
            for (String line : Files.readAllLines(cgroup.resolve("cgroup.procs"), StandardCharsets.US_ASCII)) {
                String t = line.trim();
                if (!t.isEmpty()) {
                    out.add(Long.parseLong(t));
                }
            }
        } catch (NoSuchFileException e) {
            return out;
        } catch (IOException | NumberFormatException e) {
            return out;
        }
        return out;
    }

    /**
     * Sends {@code sig} to every process of the cgroup.
     *
     * @param relative the cgroup's path below its hierarchy's mount ({@code /gpusched.jobs/job-a1-3}), to check each
     *                 process is still in it
     * @return how many processes were signalled
     */
    static int signalAll(Path cgroup, String relative, int sig) {
        Libc libc = Libc.Holder.get();
        if (libc == null) {
            throw new IsolationException("signalling a job needs libc through JNA: " + Libc.Holder.failure());
        }
        int n = 0;
        for (long pid : pids(cgroup)) {
            if (send(libc, pid, relative, sig)) {
                n++;
            }
        }
        return n;
    }

    private static volatile boolean noPidfd;

    private static boolean send(Libc libc, long pid, String relative, int sig) {
        if (!noPidfd) {
            int fd;
            try {
                fd = (int) libc.syscall(SYS_PIDFD_OPEN, (int) pid, 0);
            } catch (LastErrorException e) {
                if (e.getErrorCode() == ENOSYS) {
                    noPidfd = true;
                    return send(libc, pid, relative, sig);
                }
                return false; // ESRCH: gone
            }
            try {
                if (!inCgroup(pid, relative)) {
                    return false;
                }
                libc.syscall(SYS_PIDFD_SEND_SIGNAL, fd, sig, null, 0);
                return true;
            } catch (LastErrorException e) {
                return false;
            } finally {
                libc.close(fd);
            }
        }
        if (!inCgroup(pid, relative)) {
            return false;
        }
        try {
            libc.kill((int) pid, sig);
            return true;
        } catch (LastErrorException e) {
            if (e.getErrorCode() != ESRCH) {
                throw new IsolationException("kill(" + pid + ", " + sig + ") failed: " + Libc.describe(e));
            }
            return false;
        }
    }

    /** @return whether /proc says the process is in the cgroup at {@code relative} (in any hierarchy) */
    static boolean inCgroup(long pid, String relative) {
        try {
            for (String line : Files.readAllLines(Path.of("/proc", Long.toString(pid), "cgroup"))) {
                int c = line.indexOf(':', line.indexOf(':') + 1);
                if (c > 0 && line.substring(c + 1).equals(relative)) {
                    return true;
                }
            }
        } catch (IOException e) {
            return false;
        }
        return false;
    }

    /**
     * Kills every process of the cgroup and removes it (with any probe children left in it).
     *
     * @return empty when the cgroup is gone; else why it could not be removed
     */
    static String endAndRemove(Path cgroup, String relative) {
        if (!Files.isDirectory(cgroup)) {
            return "";
        }
        Path kill = cgroup.resolve("cgroup.kill");
        for (int i = 0; i < 500; i++) {
            if (Files.exists(kill)) {
                try {
                    Files.writeString(kill, "1");
                } catch (IOException e) {
                    signalAll(cgroup, relative, 9);
                }
            } else {
                signalAll(cgroup, relative, 9);
            }
            try (var children = Files.list(cgroup)) {
                for (Path c : children.filter(Files::isDirectory).toList()) {
                    endAndRemove(c, relative + "/" + c.getFileName());
                }
            } catch (IOException e) {
                // gone meanwhile
            }
            try {
                Files.deleteIfExists(cgroup);
                return "";
            } catch (IOException busy) {
                try {
                    Thread.sleep(i < 50 ? 2 : 20);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return "interrupted while ending the processes of " + cgroup;
                }
            }
        }
        return cgroup + " still has processes " + pids(cgroup) + " after SIGKILL; it is left in place";
    }
}
