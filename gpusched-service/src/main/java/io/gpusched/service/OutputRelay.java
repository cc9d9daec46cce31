package io.gpusched.service;

import java.io.IOException;
import java.io.InputStream;
import java.time.Duration;
import java.util.function.LongSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Relays one of a job's output pipes (stdout or stderr) to its sink, on a thread of its own, and keeps the time it has
 * spent in reads of the pipe since the job's processes ended ({@link #readingSinceEnd}).
 *
 * <p>That time is what tells the job's driver whether the relay still carries the job's own output: once every
 * process of the job has ended, what its pipe holds is read at once, so a relay that has spent a while in reads since
 * then is waiting on a process outside the job that holds the pipe (the job passed it on), and may be let go. The time
 * the relay waits for a slow or paused client ({@link JobSink#output}) does not count: a client that pauses, then
 * reads again, gets all of the job's output before its exit line, however long it paused.
 */
final class OutputRelay {
    private static final Logger LOG = LoggerFactory.getLogger(OutputRelay.class);

    private final Thread thread;
    /** {@link System#nanoTime}, or a test's */
    private final LongSupplier nanoTime;
    /** Guards everything below. */
    private final Object lock = new Object();
    /** Bytes it may still read: unbounded while the job runs, then {@link #jobEnded}'s bound. */
    private long left = Long.MAX_VALUE;
    /** The job's processes have ended, at {@link #endedAt} ({@link System#nanoTime}). */
    private boolean ended;
    private long endedAt;
    /** A read is under way, since {@link #readSince}. */
    private boolean reading;
    private long readSince;
    /** Time spent in reads that ended, counted from {@link #endedAt}. */
    private long readNanos;

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
                    if (left <= 0) {
                        return; // its bound is spent: the pipe is let go (a writer outside the job gets EPIPE)
                    }
                    reading = true;
                    readSince = nanoTime.getAsLong();
                }
                int n;
                try {
                    n = in.read(buf);
                } finally {
                    synchronized (lock) {
                        reading = false;
                        if (ended) {
                            readNanos += nanoTime.getAsLong() - Math.max(readSince, endedAt);
                        }
                    }
                }
                if (n <= 0) {
                    return;
                }
                synchronized (lock) {
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
     * The job's processes have ended: from now on its reads are timed, and it reads at most {@code bound} bytes more
     * (what a pipe can hold), so a process outside the job that holds the pipe cannot keep it reading, however slowly
     * the client reads.
     */
    void jobEnded(long bound) {
        synchronized (lock) {
            if (!ended) {
                ended = true;
                endedAt = nanoTime.getAsLong();
                left = Math.min(left, bound);
            }
        }
    }

    /** @return the time spent in reads of the pipe since {@link #jobEnded} (the read under way included) */
    Duration readingSinceEnd() {
        synchronized (lock) {
            if (!ended) {
                return Duration.ZERO;
            }
            long now = nanoTime.getAsLong();
            return Duration.ofNanos(readNanos + (reading ? now - Math.max(readSince, endedAt) : 0));
        }
    }

    boolean isAlive() {
        return thread.isAlive();
    }

    void join(long millis) throws InterruptedException {
        thread.join(millis);
    }

    /** Lets the pipe go: a read under way ends ({@code LaunchedJob.stdout}), and so does the relay. */
    void interrupt() {
        thread.interrupt();
    }
}
