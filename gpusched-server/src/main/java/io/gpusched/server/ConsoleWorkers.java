package io.gpusched.server;

import java.util.concurrent.ThreadFactory;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The console's worker accounting. Jetty's pool runs every request; an open event stream holds its worker for the
 * stream's life, so the pool is sized {@code threads + maxSseClients} plus Jetty's own few, and {@code threads} stay
 * for everything else. This counts the workers streams hold ({@link #hold}) and names the console's other threads.
 */
final class ConsoleWorkers {
    /** Threads Jetty keeps for itself: an acceptor and a selector per connector (two connectors at most). */
    static final int JETTY_OWN = 8;
    private final AtomicInteger held = new AtomicInteger();

    /** @param delta +1 when a handler starts holding its worker, -1 when it gives it back */
    void hold(int delta) {
        held.addAndGet(delta);
    }

    /** @return worker threads held by open event streams */
    int held() {
        return held.get();
    }

    /** @return a factory of daemon threads named {@code name-1}, {@code name-2}, ... */
    static ThreadFactory daemon(String name) {
        AtomicInteger n = new AtomicInteger();
        return r -> {
            Thread t = new Thread(r, name + "-" + n.incrementAndGet());
            t.setDaemon(true);
            return t;
        };
    }
}
