package io.gpusched.service;

import com.sun.net.httpserver.HttpExchange;
import io.gpusched.server.Caller;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.Arrays;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.BooleanSupplier;

/**
 * An attached job's client: {@code 200}, {@code application/x-ndjson}, one JSON object a line, each flushed as it
 * comes (docs/SERVICE.md, Jobs). The answer begins with the first event, so a refusal before the job waits or starts is
 * still an ordinary error answer. A write that fails means the client has gone: {@link #gone()} says so from then on.
 *
 * <p>Lines go to the client from a writer thread of the stream's own, in the order they were given. Nothing the job's
 * driver gives ({@code queued}, {@code started}, heartbeats, {@code exit}) ever waits for the client: a client that
 * stops reading cannot keep the driver from seeing its job end and releasing its GPUs. The job's output does wait
 * once {@link #MAX_QUEUED} bytes wait for the client (its pipe fills and the job waits, as on a paused terminal), and
 * the driver gives the {@code exit} line only after the output (its relays wait for the client as long as it takes:
 * {@link OutputRelay}), so a client that reads again gets all of it, then its exit.
 */
final class StreamSink implements JobSink {
    /** Most bytes of lines waiting for the client before the job's output waits (one started line may pass it). */
    static final int MAX_QUEUED = 256 * 1024;

    private final HttpExchange ex;
    private final NodeService service;
    private final Caller caller;
    private final BooleanSupplier watch;
    /** Guards everything below but {@link #out}, which only the writer uses. */
    private final Object lock = new Object();
    private final ArrayDeque<byte[]> lines = new ArrayDeque<>();
    private long queuedBytes;
    /** The writer is writing the first of {@link #lines}. */
    private boolean writing;
    /** No line comes any more ({@link #close}). */
    private boolean finished;
    /** The exit line was given: the job's output that comes after it is dropped. */
    private boolean ended;
    private boolean writerEnded;
    private Thread writer;
    private OutputStream out;
    private volatile boolean gone;
    /** per stream (0 stdout, 1 stderr): nanoseconds its output waited for room, and the wait under way (0: none) */
    private final long[] roomWaited = new long[2];
    private final long[] roomWaitSince = new long[2];

    /** @param watch whether the client's connection has closed (checked while the job waits in the queue) */
    StreamSink(HttpExchange ex, NodeService service, Caller caller, BooleanSupplier watch) {
        this.ex = ex;
        this.service = service;
        this.caller = caller;
        this.watch = watch;
    }

    /** @return whether the answer has begun (a line was given: errors then go in the stream) */
    boolean begun() {
        synchronized (lock) {
            return writer != null;
        }
    }

    /**
     * Queues a line for the client.
     *
     * @param waitForRoom whether to wait while {@link #MAX_QUEUED} bytes wait already (the job's output); the
     *                    driver's lines never wait
     * @param onlyIfIdle  give the line only when nothing waits and nothing is being written (a heartbeat, a queue
     *                    position: a write under way checks the client already)
     * @throws IOException when the client has gone, or the stream was closed
     */
    private void line(Map<String, Object> event, boolean waitForRoom, boolean onlyIfIdle) throws IOException {
        line((ServiceExchanges.json(event) + "\n").getBytes(StandardCharsets.UTF_8), waitForRoom, onlyIfIdle, 0);
    }

    /**
     * @param stream the job's stream whose output it is (0 stdout, 1 stderr), for {@link #roomWaitNanos}: only output
     *               waits for room, one relay a stream
     */
    private void line(byte[] b, boolean waitForRoom, boolean onlyIfIdle, int stream) throws IOException {
        synchronized (lock) {
            long waitSince = 0; // this call's wait only: another line (a heartbeat) never ends the relay's (review49)
            try {
                while (waitForRoom && !gone && !finished && !ended && queuedBytes >= MAX_QUEUED) {
                    if (waitSince == 0) {
                        waitSince = System.nanoTime() | 1; // never 0 while waiting
                        roomWaitSince[stream] = waitSince;
                    }
                    lock.wait();
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new InterruptedIOException("interrupted while the client's stream was full");
            } finally {
                if (waitSince != 0) {
                    roomWaited[stream] += System.nanoTime() - waitSince;
                    roomWaitSince[stream] = 0;
                }
            }
            if (gone) {
                throw new IOException("the client has gone");
            }
            if (finished) {
                throw new IOException("the stream is closed");
            }
            if (waitForRoom && ended) {
                return; // the job's output (the only lines that wait for room) after its exit line: dropped
            }
            if (onlyIfIdle && (writing || !lines.isEmpty())) {
                return;
            }
            lines.add(b);
            queuedBytes += b.length;
            if (writer == null) {
                writer = new Thread(this::write, "gpusched-job-stream");
                writer.setDaemon(true);
                writer.start();
            }
            lock.notifyAll();
        }
    }

    /** The writer: sends the answer's head, then each line in order, until the stream is closed and drained. */
    private void write() {
        while (true) {
            byte[] b;
            synchronized (lock) {
                try {
                    while (lines.isEmpty() && !finished) {
                        lock.wait();
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    ended(true);
                    return;
                }
                if (lines.isEmpty()) {
                    ended(false);
                    return;
                }
                b = lines.peek();
                writing = true;
            }
            try {
                if (out == null) {
                    ex.getResponseHeaders().set("Content-Type", "application/x-ndjson");
                    ex.getResponseHeaders().set("Cache-Control", "no-store");
                    ex.sendResponseHeaders(200, 0);
                    out = ex.getResponseBody();
                }
                out.write(b);
                out.flush();
            } catch (IOException | RuntimeException e) {
                synchronized (lock) {
                    ended(true);
                }
                return;
            }
            synchronized (lock) {
                lines.poll();
                queuedBytes -= b.length;
                writing = false;
                lock.notifyAll();
            }
        }
    }

    /** Caller holds {@link #lock}. The writer ends; {@code failed}: the client has gone, and what waits is dropped. */
    private void ended(boolean failed) {
        if (failed) {
            gone = true;
            lines.clear();
            queuedBytes = 0;
        }
        writing = false;
        writerEnded = true;
        lock.notifyAll();
    }

    private static Map<String, Object> event(String type) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("type", type);
        return m;
    }

    @Override
    public boolean gone() {
        if (!gone && watch.getAsBoolean()) { // a read tells at once; a write only when there is one
            gone = true;
        }
        return gone;
    }

    @Override
    public void queued(int position) throws IOException {
        Map<String, Object> m = event("queued");
        m.put("position", position);
        line(m, false, true);
    }

    @Override
    public void started(Job job) throws IOException {
        Map<String, Object> m = event("started");
        m.put("job", job.view(caller));
        m.put("allocation", ServiceViews.allocation(job.allocation, service.clock().instant()));
        line(m, false, false);
    }

    @Override
    public void output(boolean stderr, byte[] b, int len) throws IOException {
        Map<String, Object> m = event(stderr ? "stderr" : "stdout");
        m.put("data", Base64.getEncoder().encodeToString(len == b.length ? b : Arrays.copyOf(b, len)));
        line((ServiceExchanges.json(m) + "\n").getBytes(StandardCharsets.UTF_8), true, false, stderr ? 1 : 0);
    }

    @Override
    public long roomWaitNanos(boolean stderr) {
        synchronized (lock) {
            int i = stderr ? 1 : 0;
            return roomWaited[i] + (roomWaitSince[i] != 0 ? System.nanoTime() - roomWaitSince[i] : 0);
        }
    }

    /** An empty line, when nothing waits for the client and nothing is being written; never waits. */
    @Override
    public void heartbeat() throws IOException {
        synchronized (lock) {
            if (writer == null && !gone) {
                return; // nothing sent yet: the head goes with the first event
            }
        }
        line(new byte[]{'\n'}, false, true, 0);
    }

    @Override
    public void exit(int code, String signal) throws IOException {
        Map<String, Object> m = event("exit");
        m.put("code", code);
        m.put("signal", signal);
        synchronized (lock) {
            ended = true; // output given after this (a relay let go late) is dropped: the exit line stays last
            lock.notifyAll();
        }
        line(m, false, false);
    }

    /**
     * Gives up the answer before it began, leaving the exchange to the caller (a refusal answered with its own
     * status): no line comes any more.
     *
     * @return false when the answer had begun after all (then {@link #error} and {@link #close} end it)
     */
    boolean abandon() {
        synchronized (lock) {
            if (writer != null) {
                return false;
            }
            finished = true;
            lock.notifyAll();
            return true;
        }
    }

    /** Ends the stream with an error event (the answer had begun). */
    void error(RuntimeException e) {
        Map<String, Object> m = event("error");
        m.putAll(ServiceExchanges.error(e));
        try {
            line(m, false, false);
        } catch (IOException gone) {
            // nobody to tell
        }
    }

    /**
     * Closes the answer once every line given has been written: waits for a client that does not read (this thread
     * holds nothing of the job's then), until it reads, goes, or the console closes its connection.
     */
    void close() {
        boolean started;
        synchronized (lock) {
            finished = true;
            lock.notifyAll();
            started = writer != null;
            try {
                while (started && !writerEnded) {
                    lock.wait();
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        try {
            if (out != null) {
                out.close();
            }
        } catch (IOException e) {
            // the client has gone
        }
        ex.close();
    }
}
