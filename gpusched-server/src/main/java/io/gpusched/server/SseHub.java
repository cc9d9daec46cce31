package io.gpusched.server;

import com.sun.net.httpserver.HttpExchange;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Server-sent event clients. A client is an exchange whose response stays open after its handler returns. Each event
 * is encoded once and queued by reference to every client; each client's queue is bounded in bytes
 * ({@value #MAX_QUEUED_BYTES}; one frame is always accepted into an empty queue) and drained by a writer thread only
 * while it has something to write, so a client costs a queue, not a thread.
 *
 * <p>Slow clients: a client whose queue would go over the bound, or whose write has been blocked for longer than
 * {@code stallNanos}, is <em>dropped</em>: its queue is freed, it gets no more events, it is counted in
 * {@link #dropped()}, and its connection is closed. The publisher never blocks and never waits for a client. The JDK's
 * server does not expose the socket, and closing an exchange writes the last chunk, which blocks on a peer that does
 * not read; but its response stream writes to a blocking {@code SocketChannel}, an interruptible channel: interrupting
 * the thread blocked in that write closes the channel. So a drop interrupts the client's writer thread if it is in a
 * write for that client (only then: the check and the interrupt happen under the client's lock, which the writer
 * takes before it moves on). A connection holds its slot ({@link #connections()}) until its writer has let go of it,
 * so at most {@code maxClients} connections and writer threads exist whatever clients do; past that a client gets
 * 503.
 *
 * <p>A JDK limitation left as is: when an exchange's close fails (its last flush fails because the client is gone or
 * was dropped), JDK 17's {@code ExchangeImpl.close} closes the connection without removing it from the server's set of
 * connections, so about 6.5 KiB (the connection record and its read buffer; the socket itself is closed) stay
 * reachable until the server stops: measured 2,000 records and 12.8 MB more heap after 2,000 streams whose clients
 * hung up (605 records after 2,000 dropped slow clients). Nothing reachable through the public API removes them.
 */
final class SseHub implements AutoCloseable {
    static final int MAX_QUEUED_BYTES = 256 * 1024;

    private final Set<Client> clients = ConcurrentHashMap.newKeySet();
    /** every connection not yet released: receiving clients and dropped ones still being closed */
    private final Set<Client> open = ConcurrentHashMap.newKeySet();
    private final ThreadPoolExecutor writers;
    private final ThreadFactory threads;
    private final int maxClients;
    private final long stallNanos;
    private final AtomicInteger connections = new AtomicInteger();
    private final AtomicLong sequence = new AtomicLong();
    private final AtomicLong dropped = new AtomicLong();
    private final AtomicLong queuedBytes = new AtomicLong();
    private final AtomicLong maxClientQueuedBytes = new AtomicLong();

    /**
     * @param maxClients most event-stream connections at once, dropped ones whose write is still blocked included
     * @param stallNanos how long one write may block before its client is dropped
     * @param threads    names the writer threads
     */
    SseHub(int maxClients, long stallNanos, ThreadFactory threads) {
        this.maxClients = maxClients;
        this.stallNanos = stallNanos;
        // a thread is started only when no idle one can take the task (hand-off queue) and ends after 30 s idle; one
        // task at most runs per connection, so at most maxClients run at once (+ a margin for a thread still
        // returning after its connection's slot was freed; past it, see submit)
        this.threads = threads;
        this.writers = new ThreadPoolExecutor(0, maxClients + 8, 30, TimeUnit.SECONDS, new SynchronousQueue<>(),
                threads);
    }

    /** @return whether there was room; the caller answers 503 otherwise */
    boolean open(HttpExchange exchange, String firstEvent, String firstData) throws IOException {
        if (connections.incrementAndGet() > maxClients) {
            connections.decrementAndGet();
            return false;
        }
        Client c = new Client(exchange);
        try {
            exchange.getResponseHeaders().set("Content-Type", "text/event-stream; charset=utf-8");
            exchange.getResponseHeaders().set("Cache-Control", "no-store");
            exchange.getResponseHeaders().set("X-Accel-Buffering", "no");
            exchange.sendResponseHeaders(200, 0);
        } catch (IOException | RuntimeException e) {
            c.release();
            throw e;
        }
        open.add(c);
        clients.add(c);
        c.enqueue(("retry: 2000\n" + frame(firstEvent, firstData)).getBytes(StandardCharsets.UTF_8));
        return true;
    }

    /** Sends one event to every client; never blocks on a client. */
    void broadcast(String event, String data) {
        byte[] f = frame(event, data).getBytes(StandardCharsets.UTF_8);
        for (Client c : clients) {
            c.enqueue(f);
        }
    }

    /** A comment line to every client, so dead connections are noticed; drops clients stalled in a write. */
    void heartbeat() {
        byte[] ping = ": ping\n\n".getBytes(StandardCharsets.US_ASCII);
        long now = System.nanoTime();
        for (Client c : open) {
            long since = c.writingSince;
            if (since != 0 && now - since > stallNanos) {
                c.drop();
            } else {
                c.enqueue(ping);
            }
        }
    }

    /** @return clients receiving events */
    int size() {
        return clients.size();
    }

    /** @return connections held: clients receiving events plus dropped ones whose last write has not returned yet */
    int connections() {
        return connections.get();
    }

    /** @return slow clients dropped since start */
    long dropped() {
        return dropped.get();
    }

    /** @return bytes queued for all clients together (frames shared between clients count once per client) */
    long queuedBytes() {
        return queuedBytes.get();
    }

    /** @return the most bytes one client's queue ever held */
    long maxClientQueuedBytes() {
        return maxClientQueuedBytes.get();
    }

    private String frame(String event, String data) {
        StringBuilder sb = new StringBuilder("id: ").append(sequence.incrementAndGet()).append("\nevent: ")
                .append(event).append('\n');
        for (String line : data.split("\n", -1)) {
            sb.append("data: ").append(line).append('\n');
        }
        return sb.append('\n').toString();
    }

    @Override
    public void close() {
        for (Client c : open) {
            c.drop(false);
        }
        writers.shutdownNow();
    }

    private final class Client {
        private final HttpExchange exchange;
        private final OutputStream out;
        private final ArrayDeque<byte[]> queue = new ArrayDeque<>();
        private final AtomicBoolean released = new AtomicBoolean();
        private int bytes;
        private boolean scheduled;
        private boolean closed;
        private boolean counted;
        /** the pool thread running this client's task, set and cleared under this client's lock */
        private Thread writer;
        private volatile long writingSince;

        Client(HttpExchange exchange) {
            this.exchange = exchange;
            this.out = exchange.getResponseBody();
        }

        void enqueue(byte[] frame) {
            synchronized (this) {
                if (closed) {
                    return;
                }
                if (bytes > 0 && bytes + frame.length > MAX_QUEUED_BYTES) {
                    dropLocked();
                    return;
                }
                queue.add(frame);
                bytes += frame.length;
                queuedBytes.addAndGet(frame.length);
                maxClientQueuedBytes.accumulateAndGet(bytes, Math::max);
                if (scheduled) {
                    return;
                }
                scheduled = true;
            }
            submit(this::drain);
        }

        /** Stops sending to this client, frees its queue, counts it and closes its connection. */
        void drop() {
            drop(true);
        }

        void drop(boolean count) {
            synchronized (this) {
                dropLocked(count);
            }
        }

        private void dropLocked() {
            dropLocked(true);
        }

        private void dropLocked(boolean count) {
            if (count && !counted && !released.get()) {
                counted = true;
                dropped.incrementAndGet();
            }
            if (!closed) {
                closed = true;
                clients.remove(this);
                clearLocked();
                if (!scheduled) {
                    scheduled = true;
                    submit(this::finish); // the writer is idle: close on a pool thread (it may block, see below)
                }
            }
            if (writer != null) {
                // the writer is inside this client's task (it clears the field under this lock before leaving): a
                // write blocked on the socket ends with ClosedByInterruptException and the connection is closed
                writer.interrupt();
            }
        }

        private void clearLocked() {
            queuedBytes.addAndGet(-bytes);
            bytes = 0;
            queue.clear();
        }

        private void submit(Runnable task) {
            try {
                writers.execute(task);
            } catch (RejectedExecutionException full) {
                if (!writers.isShutdown()) { // the margin was not enough for a moment: a thread of its own
                    threads.newThread(task).start();
                    return;
                }
                synchronized (this) {
                    closed = true;
                    clients.remove(this);
                    clearLocked();
                }
                release();
            }
        }

        private void drain() {
            synchronized (this) {
                writer = Thread.currentThread();
            }
            while (true) {
                byte[] f;
                boolean more;
                synchronized (this) {
                    if (closed) {
                        break;
                    }
                    f = queue.poll();
                    if (f == null) {
                        scheduled = false;
                        writer = null;
                        Thread.interrupted();
                        return;
                    }
                    bytes -= f.length;
                    queuedBytes.addAndGet(-f.length);
                    more = !queue.isEmpty();
                }
                try {
                    writingSince = System.nanoTime() | 1; // never 0 while writing
                    out.write(f);
                    if (!more) {
                        out.flush();
                    }
                } catch (IOException gone) {
                    synchronized (this) {
                        closed = true;
                        clients.remove(this);
                        clearLocked();
                    }
                    break;
                } finally {
                    writingSince = 0;
                }
            }
            finish();
        }

        private void finish() {
            synchronized (this) {
                writer = Thread.currentThread();
            }
            try {
                // closing writes the last chunk: on a peer that does not read it blocks like any write, and a later
                // drop or stall check interrupts it the same way
                writingSince = System.nanoTime() | 1;
                exchange.close();
            } catch (RuntimeException ignored) {
                // already closed
            } finally {
                writingSince = 0;
                synchronized (this) {
                    writer = null;
                    Thread.interrupted(); // an interrupt meant for this client's write must not reach the next task
                }
                release();
            }
        }

        void release() {
            if (released.compareAndSet(false, true)) {
                open.remove(this);
                connections.decrementAndGet();
            }
        }
    }
}
