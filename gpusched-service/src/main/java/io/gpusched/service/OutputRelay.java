package io.gpusched.service;

import java.io.IOException;
import java.io.InputStream;
import java.time.Duration;
import java.util.function.LongSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Relays one of a job's output pipes (stdout or stderr) to its sink, on a thread of its own, and keeps the time it has
 * been at work since the job's processes ended: all of it but the time its output waited for room at a slow or paused
 * client ({@link #activeSinceEnd}, {@link JobSink#roomWaitNanos}).
 *
 * <p>That time is what tells the job's driver whether the relay still carries the job's own output: once every
 * process of the job has ended, what its pipe holds is read at once, so a relay that has been at work a while since
 * then is relaying a process outside the job that holds the pipe (the job passed it on: silent, or writing as fast as
 * it can), and may be let go. The time it waits for its client does not count: a client that pauses, then reads again,
 * gets all of the job's output before its exit line, however long it paused. After the end it also reads no more than
 * a bound ({@link #jobEnded}), so a process outside the job cannot keep it going at a slow client's pace either.
 */
final class OutputRelay {
    private static final Logger LOG = LoggerFactory.getLogger(OutputRelay.class);

    private final Thread thread;
    /** {@link System#nanoTime}, or a test's (the sink's {@link JobSink#roomWaitNanos} on the same clock) */
    private final LongSupplier nanoTime;
    private final JobSink sink;
    private final boolean stderr;
    /** Guards everything below. */
    private final Object lock = new Object();
    /** Bytes it may still read: unbounded while the job runs, then {@link #jobEnded}'s bound. */
    private long left = Long.MAX_VALUE;
    /** The job's processes have ended, at {@link #endedAt}, when its output had waited {@link #waitedAtEnd}. */
    private boolean ended;
    private long endedAt;
    private long waitedAtEnd;
    /** A read of the pipe is under way (the only place {@link #letGo} interrupts). */
    private boolean reading;
    /** {@link #letGo} came: no more reads, no more output. */
    private boolean stop;

    /**
     * Starts relaying.
     *
     * @param onGone called (once) when the sink says its client has gone; the relay keeps reading and drops what it
     *               reads, so the job never blocks on a full pipe while it ends
     */
    OutputRelay(String jobId, InputStream in, boolean stderr, JobSink sink, Runnable onGone) {
        this(jobId, in, stderr, sink, onGone, System::nanoTime);
    }

    /** As above, timed by {@code nanoTime}. */
    OutputRelay(String jobId, InputStream in, boolean stderr, JobSink sink, Runnable onGone, LongSupplier nanoTime) {
        this.nanoTime = nanoTime;
        this.sink = sink;
        this.stderr = stderr;
        thread = new Thread(() -> relay(jobId, in, stderr, sink, onGone),
                "gpusched-job-" + (stderr ? "err-" : "out-") + jobId);
        thread.setDaemon(true);
        thread.start();
    }

    private void relay(String jobId, InputStream in, boolean stderr, JobSink sink, Runnable onGone) {
        byte[] buf = new byte[16 * 1024];
        boolean open = true;
        try (in) {
            while (true) {
                synchronized (lock) {
                    if (left <= 0 || stop) {
                        return; // its bound is spent, or it was let go: the pipe is closed (EPIPE for a writer)
                    }
                    reading = true;
                }
                int n;
                try {
                    n = in.read(buf);
                } finally {
                    synchronized (lock) {
                        reading = false;
                        if (stop) {
                            Thread.interrupted(); // the let-go's interrupt, which may come as the read returns
                        }
                    }
                }
                synchronized (lock) {
                    if (n <= 0 || stop) {
                        return; // what a let-go read came from a process outside the job, past its time
                    }
                    left -= n;
                }
                if (open) {
                    try {
                        sink.output(stderr, buf, n);
                    } catch (IOException gone) {
                        open = false;
                        onGone.run();
                    }
                }
            }
        } catch (IOException e) {
            LOG.debug("job {}: its {} closed: {}", jobId, stderr ? "stderr" : "stdout", e.toString());
        }
    }

    /**
     * The job's processes have ended: from now on its time at work is counted, and it reads at most {@code bound}
     * bytes more (what the job's pipe can have held), so a process outside the job that holds the pipe cannot keep it
     * reading, however slowly the client reads.
     */
    void jobEnded(long bound) {
        synchronized (lock) {
            if (!ended) {
                ended = true;
                endedAt = nanoTime.getAsLong();
                waitedAtEnd = sink.roomWaitNanos(stderr);
                left = Math.min(left, bound);
            }
        }
    }

    /**
     * @return the time since {@link #jobEnded} less the time its output waited for room at the client since then (the
     *         wait under way included)
     */
    Duration activeSinceEnd() {
        synchronized (lock) {
            if (!ended) {
                return Duration.ZERO;
            }
            long waited = sink.roomWaitNanos(stderr) - waitedAtEnd;
            return Duration.ofNanos(Math.max(0, nanoTime.getAsLong() - endedAt - waited));
        }
    }

    boolean isAlive() {
        return thread.isAlive();
    }

    void join(long millis) throws InterruptedException {
        thread.join(millis);
    }

    /**
     * Lets the pipe go: a read under way ends ({@code LaunchedJob.stdout}: the interrupt closes the pipe), and the
     * relay with it; output it is giving is not interrupted (a detached job's file channel would close on it: review47
     * noticed), and it reads nothing after it.
     */
    void letGo() {
        synchronized (lock) {
            stop = true;
            if (reading) {
                thread.interrupt();
            }
        }
    }
}
