package io.gpusched.server;

import com.sun.net.httpserver.HttpExchange;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuAllocationException.Reason;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.eclipse.jetty.http.spi.JettyHttpExchange;
import org.eclipse.jetty.io.EndPoint;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The console's exchange plumbing: bounded body reads, query parsing, JSON/text/error responses. Every handler and
 * filter of the console answers through these, so errors have one shape: {@code {"status", "error", "reason"?}}.
 */
final class Exchanges {
    private static final Logger LOG = LoggerFactory.getLogger(Exchanges.class);
    /** The content type of an event stream; an exchange with it is left open when its handler returns. */
    static final String EVENT_STREAM = "text/event-stream; charset=utf-8";

    private Exchanges() {
    }

    /** Thrown when a request body is over the limit (answered 413). */
    static final class RequestTooLarge extends RuntimeException {
        private static final long serialVersionUID = 1L;

        RequestTooLarge(String m) {
            super(m);
        }
    }

    /** Thrown for a query parameter that cannot be used (answered 400). */
    static final class BadQuery extends IllegalArgumentException {
        private static final long serialVersionUID = 1L;

        BadQuery(String m) {
            super(m);
        }
    }

    private static final String IDLE = Exchanges.class.getName() + ".idleTimeout";

    /**
     * For a host's request held open (a wait in a queue, a job's output): takes one of the {@code maxHeldRequests}
     * slots of the exchange's {@link ClientLimits} (given back by {@link ClientLimitFilter} when the exchange ends),
     * then {@link #keepOpen}. Event streams do not come here: {@code maxSseClients} bounds them, on workers of their
     * own.
     *
     * @throws GpuAllocationException {@code RATE_LIMITED} naming {@code maxHeldRequests} when the slots are taken
     */
    static void holdOpen(HttpExchange ex) {
        if (ex.getAttribute(ClientLimitFilter.HELD_OPEN) == null
                && ex.getAttribute(ClientLimitFilter.LIMITS) instanceof ClientLimits limits) {
            String refusal = limits.acquireHeld();
            if (refusal != null) {
                throw new GpuAllocationException(Reason.RATE_LIMITED, refusal);
            }
            ex.setAttribute(ClientLimitFilter.HELD_OPEN, Boolean.TRUE);
        }
        keepOpen(ex);
    }

    /**
     * Lifts the idle timeout from this exchange's connection until the exchange ends (then {@link ExchangeFilter}
     * gives it back, for the next request on the connection). For a handler that answers late or streams: an event
     * stream, a request that waits in a queue. Call it after the request body is read, so that a client that stalls
     * in its body is still cut by the idle timeout.
     */
    static void keepOpen(HttpExchange ex) {
        EndPoint e = endPoint(ex);
        if (e != null && ex.getAttribute(IDLE) == null) {
            ex.setAttribute(IDLE, e.getIdleTimeout());
            e.setIdleTimeout(0);
        }
    }

    /** Gives the connection its idle timeout back after {@link #keepOpen}; harmless otherwise. */
    static void restoreIdleTimeout(HttpExchange ex) {
        EndPoint e = endPoint(ex);
        if (e != null && ex.getAttribute(IDLE) instanceof Long ms) {
            e.setIdleTimeout(ms);
            ex.setAttribute(IDLE, null);
        }
    }

    private static EndPoint endPoint(HttpExchange ex) {
        return ex instanceof JettyHttpExchange j ? j.getRequest().getConnectionMetaData().getConnection().getEndPoint()
                : null;
    }

    /** A response body writer that may fail with I/O. */
    interface Io {
        void run() throws IOException;
    }

    /**
     * Runs {@code io} for GET and HEAD; answers 405 with {@code Allow: GET} for any other method.
     */
    static void get(HttpExchange ex, Io io) throws IOException {
        String method = ex.getRequestMethod();
        if (!method.equals("GET") && !method.equals("HEAD")) {
            ex.getResponseHeaders().set("Allow", "GET");
            error(ex, 405, method + " is not allowed here", null);
            return;
        }
        io.run();
    }

    /**
     * @return the whole request body
     * @throws RequestTooLarge when a declared or streamed body is over {@code maxBytes}
     * @throws IllegalArgumentException when Content-Length is not a number
     */
    static byte[] readBody(HttpExchange ex, int maxBytes) throws IOException {
        String declared = ex.getRequestHeaders().getFirst("Content-Length");
        if (declared != null) {
            long n;
            try {
                n = Long.parseLong(declared.trim());
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("bad Content-Length " + declared);
            }
            if (n > maxBytes) {
                throw new RequestTooLarge("request body of " + n + " bytes is over the limit of " + maxBytes);
            }
        }
        try (InputStream in = ex.getRequestBody()) {
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            byte[] buf = new byte[8192];
            int r;
            while ((r = in.read(buf)) > 0) {
                out.write(buf, 0, r);
                if (out.size() > maxBytes) {
                    throw new RequestTooLarge("request body is over the limit of " + maxBytes + " bytes");
                }
            }
            return out.toByteArray();
        }
    }

    /** Reads and drops up to {@code maxBytes} of the request body (so a refused request does not stall its client). */
    static void drain(HttpExchange ex, int maxBytes) {
        try (InputStream in = ex.getRequestBody()) {
            byte[] buf = new byte[8192];
            long left = maxBytes;
            int r;
            while (left > 0 && (r = in.read(buf, 0, (int) Math.min(buf.length, left))) > 0) {
                left -= r;
            }
        } catch (IOException ignored) {
            // the client went away
        }
    }

    /**
     * @param keys the parameters read (others are ignored)
     * @return each of {@code keys} given, decoded
     * @throws BadQuery when one of {@code keys} is given more than once (an ambiguous query is not resolved to its
     *     first or last value)
     */
    static Map<String, String> query(HttpExchange ex, String... keys) {
        Map<String, String> out = new LinkedHashMap<>();
        String q = ex.getRequestURI().getRawQuery();
        if (q == null || q.isEmpty()) {
            return out;
        }
        List<String> wanted = List.of(keys);
        for (String kv : q.split("&", -1)) {
            int i = kv.indexOf('=');
            String key = URLDecoder.decode(i < 0 ? kv : kv.substring(0, i), StandardCharsets.UTF_8);
            if (!wanted.contains(key)) {
                continue;
            }
            String value = i < 0 ? "" : URLDecoder.decode(kv.substring(i + 1), StandardCharsets.UTF_8);
            if (out.putIfAbsent(key, value) != null) {
                throw new BadQuery("query parameter " + key + " is given more than once; give it once");
            }
        }
        return out;
    }

    static void json(HttpExchange ex, int status, Object body) throws IOException {
        ex.getResponseHeaders().set("Content-Type", "application/json");
        ex.getResponseHeaders().set("Cache-Control", "no-store");
        send(ex, status, Views.json(body).getBytes(StandardCharsets.UTF_8));
    }

    static void text(HttpExchange ex, int status, String body, String type) throws IOException {
        ex.getResponseHeaders().set("Content-Type", type);
        send(ex, status, body.getBytes(StandardCharsets.UTF_8));
    }

    /** Answers a JSON error; never throws (a client gone away is logged at DEBUG). */
    static void error(HttpExchange ex, int status, String message, String reason) {
        error(ex, status, message, reason, List.of());
    }

    /** Answers a refusal: its message and reason, and every obstacle (the message names only the first few). */
    static void error(HttpExchange ex, int status, GpuAllocationException refusal) {
        error(ex, status, refusal.getMessage(), refusal.reason().name(), refusal.obstacles());
    }

    private static void error(HttpExchange ex, int status, String message, String reason,
            List<GpuAllocationException.Obstacle> obstacles) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("status", status);
        m.put("error", message);
        if (reason != null) {
            m.put("reason", reason);
        }
        if (!obstacles.isEmpty()) {
            m.put("obstacles", obstacles.stream().map(GpuAllocationException.Obstacle::toMap).toList());
        }
        try {
            json(ex, status, m);
        } catch (IOException | RuntimeException e) {
            LOG.debug("cannot send error {}: {}", status, e.toString());
        }
    }

    /** Sends status and body (headers only for HEAD). */
    static void send(HttpExchange ex, int status, byte[] bytes) throws IOException {
        boolean head = ex.getRequestMethod().equals("HEAD");
        ex.sendResponseHeaders(status, head ? -1 : bytes.length == 0 ? -1 : bytes.length);
        if (!head && bytes.length > 0) {
            ex.getResponseBody().write(bytes);
        }
    }
}
