package io.gpusched.service;

import com.sun.net.httpserver.HttpExchange;
import io.gpusched.server.Caller;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.BooleanSupplier;

/**
 * An attached job's client: {@code 200}, {@code application/x-ndjson}, one JSON object a line, each flushed as it
 * comes (docs/SERVICE.md, Jobs). The answer begins with the first event, so a refusal before the job waits or starts is
 * still an ordinary error answer. A write that fails means the client has gone: {@link #gone()} says so from then on.
 * A client that does not read holds back the job's output (its pipe fills and the job waits, as on a paused terminal),
 * never the job's driver: the heartbeat skips a stream whose write is blocked, so the driver still sees the job end and
 * releases its GPUs.
 */
final class StreamSink implements JobSink {
    private final HttpExchange ex;
    private final NodeService service;
    private final Caller caller;
    private final BooleanSupplier watch;
    /** Held while a line is written: the output threads and the driver take turns; the heartbeat only tries it. */
    private final ReentrantLock lock = new ReentrantLock();
    private OutputStream out;
    private volatile boolean gone;

    /** @param watch whether the client's connection has closed (checked while the job waits in the queue) */
    StreamSink(HttpExchange ex, NodeService service, Caller caller, BooleanSupplier watch) {
        this.ex = ex;
        this.service = service;
        this.caller = caller;
        this.watch = watch;
    }

    /** @return whether the answer has begun (errors then go in the stream) */
    boolean begun() {
        lock.lock();
        try {
            return out != null;
        } finally {
            lock.unlock();
        }
    }

    private void begin() throws IOException {
        if (out == null) {
            ex.getResponseHeaders().set("Content-Type", "application/x-ndjson");
            ex.getResponseHeaders().set("Cache-Control", "no-store");
            ex.sendResponseHeaders(200, 0);
            out = ex.getResponseBody();
        }
    }

    private void line(Map<String, Object> event) throws IOException {
        byte[] b = (ServiceExchanges.json(event) + "\n").getBytes(StandardCharsets.UTF_8);
        lock.lock();
        try {
            if (gone) {
                throw new IOException("the client has gone");
            }
            begin();
            out.write(b);
            out.flush();
        } catch (IOException | RuntimeException e) {
            gone = true;
            throw e instanceof IOException io ? io : new IOException(e);
        } finally {
            lock.unlock();
        }
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
        line(m);
    }

    @Override
    public void started(Job job) throws IOException {
        Map<String, Object> m = event("started");
        m.put("job", job.view(caller));
        m.put("allocation", ServiceViews.allocation(job.allocation, service.clock().instant()));
        line(m);
    }

    @Override
    public void output(boolean stderr, byte[] b, int len) throws IOException {
        Map<String, Object> m = event(stderr ? "stderr" : "stdout");
        m.put("data", Base64.getEncoder().encodeToString(len == b.length ? b : Arrays.copyOf(b, len)));
        line(m);
    }

    /**
     * Writes an empty line, unless a write is under way: one blocked on a client that does not read must not block
     * the caller (the job's driver) too, and a write under way checks the connection itself.
     */
    @Override
    public void heartbeat() throws IOException {
        if (!lock.tryLock()) {
            return;
        }
        try {
            if (out == null) {
                return;
            }
            out.write('\n');
            out.flush();
        } catch (IOException | RuntimeException e) {
            gone = true;
            throw e instanceof IOException io ? io : new IOException(e);
        } finally {
            lock.unlock();
        }
    }

    @Override
    public void exit(int code, String signal) throws IOException {
        Map<String, Object> m = event("exit");
        m.put("code", code);
        m.put("signal", signal);
        line(m);
    }

    /** Ends the stream with an error event (the answer had begun). */
    void error(RuntimeException e) {
        Map<String, Object> m = event("error");
        m.putAll(ServiceExchanges.error(e));
        try {
            line(m);
        } catch (IOException gone) {
            // nobody to tell
        }
    }

    /** Closes the answer. */
    void close() {
        lock.lock();
        try {
            if (out != null) {
                out.close();
            }
        } catch (IOException e) {
            // the client has gone
        } finally {
            lock.unlock();
        }
        ex.close();
    }
}
