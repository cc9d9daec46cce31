package io.gpusched.server;

import com.sun.net.httpserver.HttpExchange;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Server-sent event clients. A client is an exchange whose handler stays in {@link Stream#await()} for the stream's
 * life. Each event is encoded once and queued by reference to every client; each client's queue is bounded in bytes
 * ({@value #MAX_QUEUED_BYTES}; one frame is always accepted into an empty queue) and drained by a writer thread only
 * while it has something to write, so a client costs a queue and a parked handler thread, not a busy thread.
 *
 * <p>Slow clients: a client whose queue would go over the bound, or whose write has been blocked for longer than
 * {@code stallNanos}, is <em>dropped</em>: its queue is freed, it gets no more events, it is counted in
 * {@link #dropped()}, and its connection is closed. The publisher never blocks and never waits for a client.
 *
 * <p>How a stream ends: the JDK's server does not expose the socket, and on JDK 17 closing an exchange whose last write
 * failed closes the socket but leaves the connection's record (about 6.5 KiB) in the server's set of connections until
 * the server stops ({@code ExchangeImpl.close} cannot flush the unwritten chunk and then only closes the connection).
 * What does make the server close <em>and</em> forget a connection is an exception out of the handler. So an abnormal
 * end (a write failed because the client went away, a drop, a stall) never closes the exchange: it wakes the client's
 * handler, which throws. That works while a write is blocked on a peer that does not read: the response stream writes
 * to a blocking {@code SocketChannel}, and closing it, or interrupting the thread blocked in it, ends the write; a drop
 * also interrupts the client's writer thread if it is in a write for that client (only then: the check and the
 * interrupt happen under the client's lock, which the writer takes before it moves on). A normal end (the server
 * stops) writes the last chunk and closes the exchange.
 *
 * <p>A connection holds its slot ({@link #connections()}) until its writer and its handler have both let go of it, so
 * at most {@code maxClients} connections, writer threads and held handler threads exist whatever clients do; past that
 * a client gets 503.
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

    /** One event stream, as its HTTP handler sees it. */
    interface Stream {
        /**
         * Holds the handler's thread until the stream ends. A normal end (the server is stopping and the last chunk
         * was written) returns, with the exchange closed. Any other end (a write failed because the client went away,
         * the client was dropped as slow or stalled, the wait was interrupted) throws: the caller lets it out of
         * {@code HttpHandler.handle}, so the JDK server closes the connection <em>and</em> forgets it. Closing the
         * exchange instead would close the socket but, on JDK 17, keep the server's record of the connection (about
         * 6.5 KiB) until the server stops: {@code ExchangeImpl.close} cannot flush after a failed write, and then only
         * closes the connection, never removing it from the server's set.
         *
         * @throws IOException the stream ended abnormally (the cause says how)
         */
        void await() throws IOException;
    }

    /**
     * Sends the response headers and registers the client; its handler then calls {@link Stream#await()}.
     *
     * @return the stream, or null when there was no room: the caller answers 503
     * @throws IOException the headers could not be sent (the client went away); no slot is held
     */
    Stream open(HttpExchange exchange, String firstEvent, String firstData) throws IOException {
        if (connections.incrementAndGet() > maxClients) {
            connections.decrementAndGet();
            return null;
        }
        Client c = new Client(exchange);
        try {
            exchange.getResponseHeaders().set("Content-Type", Exchanges.EVENT_STREAM);
            exchange.getResponseHeaders().set("Cache-Control", "no-store");
            exchange.getResponseHeaders().set("X-Accel-Buffering", "no");
            exchange.sendResponseHeaders(200, 0);
        } catch (IOException | RuntimeException e) {
            connections.decrementAndGet(); // never registered: nothing else holds it
            throw e;
        }
        open.add(c);
        clients.add(c);
        c.enqueue(("retry: 2000\n" + frame(firstEvent, firstData)).getBytes(StandardCharsets.UTF_8));
        return c;
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

    /** @return the most bytes one receiving client's queue holds now (0 with no client) */
    long largestBacklog() {
        long most = 0;
        for (Client c : clients) {
            most = Math.max(most, c.backlog());
        }
        return most;
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
            c.end();
        }
        writers.shutdownNow();
    }

    private final class Client implements Stream {
        private final HttpExchange exchange;
        private final OutputStream out;
        private final ArrayDeque<byte[]> queue = new ArrayDeque<>();
        /** the writer side and the handler side: the slot is freed when both have let go */
        private final AtomicInteger holds = new AtomicInteger(2);
        /** opens once, when the stream has ended; {@link #failure} is set before, under this client's lock */
        private final CountDownLatch ended = new CountDownLatch(1);
        private IOException failure;
        private int bytes;
        private boolean scheduled;
        private boolean closed;
        private boolean writerGone;
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
                    endLocked(new IOException("event-stream client dropped: it fell " + MAX_QUEUED_BYTES
                            + " bytes behind"), true);
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

        synchronized int backlog() {
            return bytes;
        }

        /** Drops a slow client: no more events, its queue freed, counted, its connection closed and forgotten. */
        void drop() {
            synchronized (this) {
                endLocked(new IOException("event-stream client dropped: a write blocked longer than "
                        + stallNanos + " ns"), true);
            }
        }

        /** Ends the stream normally (the server is stopping): the writer writes the last chunk. */
        void end() {
            synchronized (this) {
                endLocked(null, false);
            }
        }

        /**
         * Ends the stream, once. {@code cause} null: a normal end, the writer writes the last chunk; otherwise the
         * handler wakes and throws it, and the JDK server closes the connection, though the client does not read and
         * a write may be blocked. Either way a writer inside a write for this client is interrupted: the write ends
         * with ClosedByInterruptException, which closes the channel (its response stream writes to a blocking
         * SocketChannel, an interruptible channel).
         */
        private void endLocked(IOException cause, boolean count) {
            if (!closed) {
                closed = true;
                if (count) {
                    dropped.incrementAndGet();
                }
                clients.remove(this);
                clearLocked();
                if (cause == null) {
                    if (!scheduled) {
                        scheduled = true;
                        submit(this::finish);
                    }
                } else {
                    failLocked(cause);
                    if (!scheduled) {
                        writerLetGoLocked(); // no task for this client runs or will: the writer side is done
                    }
                }
            }
            if (writer != null && writer != Thread.currentThread()) {
                // the writer is inside this client's task (it clears the field under this lock before leaving)
                writer.interrupt();
            }
        }

        private void failLocked(IOException cause) {
            if (ended.getCount() > 0) {
                failure = cause;
                ended.countDown();
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
                    if (!closed) {
                        closed = true;
                        clients.remove(this);
                        clearLocked();
                    }
                    failLocked(new IOException("event stream ended: the server is stopping"));
                    writerLetGoLocked();
                }
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
                    // the client went away, or a drop interrupted this write: the stream cannot go on (its chunk
                    // stream keeps the unwritten bytes, so even its close would fail); the handler throws
                    synchronized (this) {
                        endLocked(gone, false);
                        failLocked(gone); // also when a normal end was asked for first
                    }
                    break;
                } finally {
                    writingSince = 0;
                }
            }
            boolean normal;
            synchronized (this) {
                normal = failure == null && ended.getCount() > 0;
            }
            if (normal) {
                finish();
            } else {
                writerDone();
            }
        }

        /** A normal end: writes the last chunk, then opens {@link #ended}. */
        private void finish() {
            synchronized (this) {
                writer = Thread.currentThread();
            }
            IOException failed = null;
            try {
                // the last chunk: on a peer that does not read it blocks like any write, and a drop, the stall check
                // or the server's stop ends it the same way
                writingSince = System.nanoTime() | 1;
                out.close();
            } catch (IOException e) {
                failed = e;
            } catch (RuntimeException e) {
                failed = new IOException("closing the event stream failed: " + e, e);
            } finally {
                writingSince = 0;
            }
            synchronized (this) {
                if (failed != null) {
                    failLocked(failed);
                } else if (ended.getCount() > 0) {
                    ended.countDown();
                }
            }
            writerDone();
        }

        private void writerDone() {
            synchronized (this) {
                writer = null;
                Thread.interrupted(); // an interrupt meant for this client's write must not reach the next task
                writerLetGoLocked();
            }
        }

        private void writerLetGoLocked() {
            if (!writerGone) {
                writerGone = true;
                letGo();
            }
        }

        private void letGo() {
            if (holds.decrementAndGet() == 0) {
                open.remove(this);
                connections.decrementAndGet();
            }
        }

        @Override
        public void await() throws IOException {
            IOException cause;
            try {
                try {
                    ended.await();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt(); // the server's pool is stopping
                    InterruptedIOException stop = new InterruptedIOException(
                            "event stream ended: the server is stopping");
                    synchronized (this) {
                        endLocked(stop, false);
                        failLocked(stop);
                    }
                }
                synchronized (this) {
                    cause = failure;
                }
            } finally {
                letGo(); // the handler side
            }
            if (cause != null) {
                throw new IOException("event stream ended: " + cause.getMessage(), cause);
            }
            exchange.close(); // the last chunk is written: this ends the exchange the normal way
        }
    }
}
