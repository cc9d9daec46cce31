package io.gpusched.nvml;

import io.gpusched.nvml.internal.NvmlEventWatch;
import io.gpusched.nvml.internal.NvmlLayout;
import io.gpusched.nvml.internal.NvmlReturn;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The XID watcher thread and its shutdown handshake. The thread waits in {@code nvmlEventSetWait_v2} (bounded by the
 * event wait), hands each XID event, each "a GPU is lost" answer and each round to its {@link Events}, and frees its
 * event set when it ends. {@link #stop} asks it to end and waits a bounded time; if the thread is still inside the
 * wait after that (a driver that does not honour the timeout), NVML's shutdown is left to the thread, which runs it
 * as soon as the call returns: NVML is never shut down under a thread that is inside it.
 */
final class XidWatcher {
    private static final Logger LOG = LoggerFactory.getLogger(XidWatcher.class);

    /** What the watcher reports; called on its thread. */
    interface Events {
        /** An XID event on {@code device} (a GPU handle), with its GPU and compute instance (0xFFFFFFFF: none). */
        void xid(long device, long xid, long gpuInstance, long computeInstance);

        /** NVML said a GPU is lost without saying which. */
        void lost();

        /** After each wait, whatever it answered: a chance to live-check devices that may recover. */
        void round();
    }

    private final NvmlEventWatch watch;
    private final Duration eventWait;
    private final Events events;
    private final Runnable shutdown;
    private final Object lifecycle = new Object();
    private final CountDownLatch closing = new CountDownLatch(1);
    private final Thread thread;
    private volatile boolean stopping;
    private boolean running;
    private boolean shutdownDeferred;

    /**
     * @param watch     the event set to wait on; freed by the thread when it ends
     * @param eventWait the longest single wait
     * @param events    what to do with what the wait answers
     * @param shutdown  NVML's shutdown, run by the thread when {@link #stop} had to leave it to it
     */
    XidWatcher(NvmlEventWatch watch, Duration eventWait, Events events, Runnable shutdown) {
        this.watch = watch;
        this.eventWait = eventWait;
        this.events = events;
        this.shutdown = shutdown;
        this.thread = new Thread(this::loop, "gpusched-nvml-xid-watcher");
        thread.setDaemon(true);
    }

    /** Starts the thread. */
    void start() {
        synchronized (lifecycle) {
            running = true;
        }
        thread.start();
    }

    /**
     * Asks the thread to end and waits up to four event waits plus a second for it (not when called from the thread
     * itself, e.g. by a listener).
     *
     * @return true when the thread is out of NVML and the caller shuts NVML down; false when the thread will do it
     */
    boolean stop() {
        stopping = true;
        closing.countDown();
        long waitMillis = eventWait.toMillis() * 4 + 1000;
        if (thread != Thread.currentThread()) {
            try {
                thread.join(waitMillis);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        synchronized (lifecycle) {
            if (running) {
                shutdownDeferred = true;
                LOG.warn("XID watcher is still inside nvmlEventSetWait_v2 after {} ms; NVML will be shut down when it"
                        + " returns", waitMillis);
                return false;
            }
        }
        return true;
    }

    private void loop() {
        int timeout = (int) Math.min(Integer.MAX_VALUE, eventWait.toMillis());
        try {
            while (!stopping) {
                long started = System.nanoTime();
                int rc = watch.await(timeout);
                if (stopping) {
                    break;
                }
                if (rc == 0 && (watch.lastType() & NvmlLayout.EVENT_TYPE_XID) != 0) {
                    events.xid(watch.lastDevice(), watch.lastData(), watch.lastGpuInstance(),
                            watch.lastComputeInstance());
                } else if (rc == NvmlReturn.ERROR_GPU_IS_LOST.code()) {
                    events.lost();
                } else if (rc != 0 && rc != NvmlReturn.ERROR_TIMEOUT.code()) {
                    LOG.debug("nvmlEventSetWait_v2: {}", NvmlReturn.describe(rc));
                }
                events.round();
                if (rc != 0) {
                    // a wait that answers at once (a lost GPU, an error, an early timeout) must not spin: at most one
                    // such wait per period
                    long left = timeout - (System.nanoTime() - started) / 1_000_000;
                    if (left > 0 && closing.await(left, TimeUnit.MILLISECONDS)) {
                        break;
                    }
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            watch.close();
            synchronized (lifecycle) {
                running = false;
                if (shutdownDeferred) {
                    LOG.info("XID watcher left nvmlEventSetWait_v2; shutting NVML down now");
                    shutdown.run();
                }
            }
        }
    }
}
