package io.gpusched.isolation;

import io.gpusched.core.Allocation;
import java.io.InputStream;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

/**
 * A job {@link JobLauncher} started: its process, its cgroup and fence. {@link #cleanUp()} ends every process of the
 * cgroup, removes it and revokes the fence, whatever way the job ended; the allocation is its caller's to release.
 */
public final class LaunchedJob {
    private final JobLauncher launcher;
    private final Allocation allocation;
    private final Path cgroup;
    private final String relative;
    private final Fence fence;
    private final Process process;
    private final InputStream stdout;
    private final InputStream stderr;
    private String cleanUp;

    LaunchedJob(JobLauncher launcher, Allocation allocation, Path cgroup, String relative, Fence fence,
            Process process, InputStream stdout, InputStream stderr) {
        this.launcher = launcher;
        this.allocation = allocation;
        this.cgroup = cgroup;
        this.relative = relative;
        this.fence = fence;
        this.process = process;
        this.stdout = stdout;
        this.stderr = stderr;
    }

    /** @return the allocation the job runs on */
    public Allocation allocation() {
        return allocation;
    }

    /** @return the job's cgroup directory */
    public Path cgroup() {
        return cgroup;
    }

    /** @return the job's fence */
    public Fence fence() {
        return fence;
    }

    /** @return the pid of the job's first process (the command, once the switch and its shell executed it) */
    public long pid() {
        return process.pid();
    }

    /**
     * @return the job's stdout when its output is piped (else an empty stream). A read blocked on it ends when its
     *         thread is interrupted or the stream is closed, also while a process outside the job still holds the
     *         pipe's write end (where libc is reachable through JNA: {@code JobPipes}); the pipe's writers then get
     *         {@code EPIPE}
     */
    public InputStream stdout() {
        return stdout;
    }

    /** @return the job's stderr when its output is piped (else an empty stream), as {@link #stdout} */
    public InputStream stderr() {
        return stderr;
    }

    /**
     * Waits for the first process to end. Unlike {@link Process#onExit()}, whose future completes on the common
     * fork-join pool (on JDK 25 with one CPU's parallelism, behind any task blocked there), this is woken by the JDK's
     * reaper thread itself.
     *
     * @return its exit code (128 + the signal's number when a signal ended it), or empty when it still runs after
     *         {@code timeout}
     */
    public Optional<Integer> waitFor(Duration timeout) throws InterruptedException {
        return process.waitFor(Math.max(0, timeout.toMillis()), TimeUnit.MILLISECONDS) ? Optional.of(process
                .exitValue()) : Optional.empty();
    }

    /** @return the exit code once the first process ended */
    public Optional<Integer> exitCode() {
        return process.isAlive() ? Optional.empty() : Optional.of(process.exitValue());
    }

    /** @return the signal's name when an exit code says a signal ended the process (128 + its number) */
    public static Optional<String> signalOf(int exitCode) {
        for (Map.Entry<String, Integer> e : CgroupProcesses.SIGNALS.entrySet()) {
            if (exitCode == 128 + e.getValue()) {
                return Optional.of(e.getKey());
            }
        }
        return exitCode > 128 && exitCode < 128 + 65 ? Optional.of("SIG" + (exitCode - 128)) : Optional.empty();
    }

    /**
     * Sends a signal to every process of the job's cgroup (as a terminal's Ctrl-C reaches a whole foreground job).
     *
     * @param name HUP, INT, QUIT, TERM, KILL, USR1 or USR2 (with or without SIG)
     * @return how many processes it reached
     * @throws IllegalArgumentException for another signal, naming the valid ones
     */
    public int signal(String name) {
        int sig = CgroupProcesses.signal(name);
        return CgroupProcesses.signalAll(cgroup, relative, sig);
    }

    /**
     * TERM to every process of the job, then, if the first process has not ended within {@code grace}, KILL to all
     * (and the clean-up).
     *
     * @return whether the job ended within the grace period
     */
    public boolean terminate(Duration grace) throws InterruptedException {
        CgroupProcesses.signalAll(cgroup, relative, CgroupProcesses.signal("TERM"));
        boolean ended = process.waitFor(Math.max(0, grace.toMillis()), TimeUnit.MILLISECONDS);
        cleanUp();
        return ended;
    }

    /**
     * Ends every process of the cgroup (whatever the job forked), removes the cgroup, then revokes the fence. When a
     * process cannot be ended the cgroup and its fence stay (the process stays fenced) and the answer says so; a
     * later call tries again. Idempotent once done.
     *
     * @return empty when all is undone; else what is left
     */
    public synchronized String cleanUp() {
        if (cleanUp != null && cleanUp.isEmpty()) {
            return cleanUp;
        }
        String left = CgroupProcesses.endAndRemove(cgroup, relative);
        if (left.isEmpty()) {
            try {
                fence.revoke();
            } catch (IsolationException e) {
                left = "revoking the fence of " + cgroup + " failed: " + e.getMessage();
            }
        }
        if (process.isAlive()) {
            process.destroyForcibly();
        }
        cleanUp = left;
        return left;
    }

    /** @return whether {@link #cleanUp()} undid everything */
    public synchronized boolean cleanedUp() {
        return cleanUp != null && cleanUp.isEmpty();
    }

    @Override
    public String toString() {
        return "LaunchedJob[" + allocation.id() + " pid " + process.pid() + " in " + cgroup + "]";
    }

    JobLauncher launcher() {
        return launcher;
    }
}
