package io.gpusched.server;

import com.sun.net.httpserver.Filter;
import com.sun.net.httpserver.HttpExchange;
import io.gpusched.server.ClientConnectionFactory.Client;
import io.gpusched.server.ClientLimits.Kind;
import java.io.IOException;

/**
 * Requests in progress per client ({@link ClientLimits}): a request takes one of its client's slots while its handler
 * runs; one over the limit is {@code 429 TOO_MANY_CONNECTIONS} naming the limit. An event stream gives its request
 * slot back and takes a stream slot instead ({@link #toStream}), so a page's stream never counts as a request. Every
 * request, limited or not, is counted while its handler runs ({@link ClientLimits#inProgress}), for the close.
 */
final class ClientLimitFilter extends Filter {
    private static final String HELD = ClientLimitFilter.class.getName() + ".held";
    /** The exchange's {@link ClientLimits}, for {@link Exchanges#holdOpen}. */
    static final String LIMITS = ClientLimitFilter.class.getName() + ".limits";
    /** Set while the exchange holds a slot of requests held open. */
    static final String HELD_OPEN = ClientLimitFilter.class.getName() + ".heldOpen";

    private final ClientLimits limits;

    ClientLimitFilter(ClientLimits limits) {
        this.limits = limits;
    }

    @Override
    public void doFilter(HttpExchange ex, Chain chain) throws IOException {
        limits.begin();
        try {
            limited(ex, chain);
        } finally {
            limits.end();
        }
    }

    private void limited(HttpExchange ex, Chain chain) throws IOException {
        Client c = IdentityFilter.client(ex);
        String refusal = limits.acquire(c, Kind.REQUESTS);
        if (refusal != null) {
            refuse(ex, refusal);
            return;
        }
        ex.setAttribute(HELD, Boolean.TRUE);
        ex.setAttribute(LIMITS, limits);
        try {
            chain.doFilter(ex);
        } finally {
            if (ex.getAttribute(HELD_OPEN) != null) {
                ex.setAttribute(HELD_OPEN, null);
                limits.releaseHeld();
            }
            if (ex.getAttribute(HELD) != null) {
                ex.setAttribute(HELD, null);
                limits.release(c, Kind.REQUESTS);
            }
        }
    }

    /**
     * Moves this request from its client's request slots to its stream slots.
     *
     * @return null when the stream may open (give it back with {@link #streamEnded}), else the refusal's sentence
     *     (the request keeps its request slot then)
     */
    static String toStream(ClientLimits limits, HttpExchange ex) {
        Client c = IdentityFilter.client(ex);
        String refusal = limits.acquire(c, Kind.STREAMS);
        if (refusal == null && ex.getAttribute(HELD) != null) {
            ex.setAttribute(HELD, null);
            limits.release(c, Kind.REQUESTS);
        }
        return refusal;
    }

    /** Gives back the stream slot {@link #toStream} took. */
    static void streamEnded(ClientLimits limits, HttpExchange ex) {
        limits.release(IdentityFilter.client(ex), Kind.STREAMS);
    }

    /**
     * Answers a limit's refusal: 429 TOO_MANY_CONNECTIONS naming it, and the connection closed after it (its body is
     * not read: a refused client that stalls in its body must not hold a worker for it).
     */
    static void refuse(HttpExchange ex, String refusal) {
        ex.getResponseHeaders().set("Retry-After", "1");
        ex.getResponseHeaders().set("Connection", "close");
        Exchanges.error(ex, 429, refusal, "TOO_MANY_CONNECTIONS");
    }

    @Override
    public String description() {
        return "gpusched console: requests in progress per client";
    }
}
