package io.gpusched.server;

import com.sun.net.httpserver.HttpExchange;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.Queue;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Server-sent event clients. A client is an exchange whose response stays open after its handler returns; events
 * are queued per client (bounded: a client that falls {@value #MAX_QUEUED} events behind is dropped) and written by
 * a small shared pool, so a client costs a queue, not a thread.
 */
final class SseHub implements AutoCloseable {
    static final int MAX_QUEUED = 512;

    private final Set<Client> clients = ConcurrentHashMap.newKeySet();
    private final ExecutorService writers;
    private final int maxClients;
    private final AtomicLong sequence = new AtomicLong();
    private final AtomicLong dropped = new AtomicLong();

    SseHub(ExecutorService writers, int maxClients) {
        this.writers = writers;
        this.maxClients = maxClients;
    }

    /** @return whether there was room; the caller answers 503 otherwise */
    boolean open(HttpExchange exchange, String firstEvent, String firstData) throws IOException {
        if (clients.size() >= maxClients) {
            return false;
        }
        exchange.getResponseHeaders().set("Content-Type", "text/event-stream; charset=utf-8");
        exchange.getResponseHeaders().set("Cache-Control", "no-store");
        exchange.getResponseHeaders().set("X-Accel-Buffering", "no");
        exchange.sendResponseHeaders(200, 0);
        Client c = new Client(exchange);
        clients.add(c);
        c.enqueue("retry: 2000\n" + frame(firstEvent, firstData));
        return true;
    }

    /** Sends one event to every client. */
    void broadcast(String event, String data) {
        String f = frame(event, data);
        for (Client c : clients) {
            c.enqueue(f);
        }
    }

    /** A comment line to every client, so dead connections are noticed. */
    void heartbeat() {
        for (Client c : clients) {
            c.enqueue(": ping\n\n");
        }
    }

    int size() {
        return clients.size();
    }

    long dropped() {
        return dropped.get();
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
        for (Client c : clients) {
            c.close();
        }
    }

    private final class Client {
        private final HttpExchange exchange;
        private final OutputStream out;
        private final Queue<String> queue = new ArrayDeque<>();
        private boolean scheduled;
        private volatile boolean closed;

        Client(HttpExchange exchange) {
            this.exchange = exchange;
            this.out = exchange.getResponseBody();
        }

        void enqueue(String frame) {
            synchronized (this) {
                if (closed) {
                    return;
                }
                if (queue.size() >= MAX_QUEUED) {
                    dropped.incrementAndGet();
                    closeLater();
                    return;
                }
                queue.add(frame);
                if (scheduled) {
                    return;
                }
                scheduled = true;
            }
            try {
                writers.execute(this::drain);
            } catch (java.util.concurrent.RejectedExecutionException e) {
                close();
            }
        }

        private void closeLater() {
            closed = true;
            queue.clear();
            writers.execute(this::close);
        }

        private void drain() {
            while (true) {
                String f;
                synchronized (this) {
                    f = queue.poll();
                    if (f == null || closed) {
                        scheduled = false;
                        return;
                    }
                }
                try {
                    out.write(f.getBytes(StandardCharsets.UTF_8));
                    boolean more;
                    synchronized (this) {
                        more = !queue.isEmpty();
                    }
                    if (!more) {
                        out.flush();
                    }
                } catch (IOException gone) {
                    close();
                    return;
                }
            }
        }

        void close() {
            closed = true;
            clients.remove(this);
            try {
                exchange.close();
            } catch (RuntimeException ignored) {
                // already closed
            }
        }
    }
}
