package io.gpusched.service;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.sun.net.httpserver.HttpExchange;
import io.gpusched.core.AccessDeniedException;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuAllocationException.Reason;
import io.gpusched.core.LedgerException;
import io.gpusched.cuda.CudaResolutionException;
import io.gpusched.isolation.IsolationException;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The service's answers in the console's shapes: JSON bodies, and errors as {@code {"status", "error", "reason", ...}}
 * with the status docs/SERVICE.md gives each refusal.
 */
final class ServiceExchanges {
    private static final Logger LOG = LoggerFactory.getLogger(ServiceExchanges.class);
    static final ObjectMapper MAPPER = new ObjectMapper().disable(SerializationFeature.FAIL_ON_EMPTY_BEANS);

    private ServiceExchanges() {
    }

    /** A body over its limit (413). */
    static final class TooLarge extends RuntimeException {
        private static final long serialVersionUID = 1L;

        TooLarge(String m) {
            super(m);
        }
    }

    /** A path no route serves (404 NOT_FOUND). */
    static final class NotFound extends RuntimeException {
        private static final long serialVersionUID = 1L;

        NotFound(String m) {
            super(m);
        }
    }

    static String json(Object o) {
        try {
            return MAPPER.writeValueAsString(o);
        } catch (JsonProcessingException e) {
            throw new UncheckedIOException(e);
        }
    }

    static void send(HttpExchange ex, int status, Object body) throws IOException {
        byte[] b = json(body).getBytes(StandardCharsets.UTF_8);
        ex.getResponseHeaders().set("Content-Type", "application/json");
        ex.getResponseHeaders().set("Cache-Control", "no-store");
        boolean head = ex.getRequestMethod().equals("HEAD");
        ex.sendResponseHeaders(status, head ? -1 : b.length);
        if (!head) {
            ex.getResponseBody().write(b);
        }
        ex.getResponseBody().close();
    }

    /** @return the whole body, at most {@code max} bytes @throws TooLarge past it */
    static byte[] body(HttpExchange ex, int max) throws IOException {
        String declared = ex.getRequestHeaders().getFirst("Content-Length");
        if (declared != null) {
            try {
                if (Long.parseLong(declared.trim()) > max) {
                    throw new TooLarge("the request body of " + declared.trim() + " bytes is over the limit of " + max);
                }
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("Content-Length \"" + Requests.printable(declared)
                        + "\" is not a number");
            }
        }
        try (InputStream in = ex.getRequestBody()) {
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            byte[] buf = new byte[8192];
            int r;
            while ((r = in.read(buf)) > 0) {
                out.write(buf, 0, r);
                if (out.size() > max) {
                    throw new TooLarge("the request body is over the limit of " + max + " bytes");
                }
            }
            return out.toByteArray();
        }
    }

    /** @return the error body and its status for what a route threw */
    static Map<String, Object> error(RuntimeException e) {
        Map<String, Object> m = new LinkedHashMap<>();
        int status;
        String reason;
        if (e instanceof AccessDeniedException a) {
            status = 403;
            reason = "FORBIDDEN";
            m.put("holder", a.holder().orElse(null));
            m.put("mayAct", a.mayAct());
        } else if (e instanceof GpuAllocationException g) {
            reason = g.reason().name();
            if (!g.obstacles().isEmpty()) { // the message is bounded; the whole list is here
                m.put("obstacles", g.obstacles().stream().map(GpuAllocationException.Obstacle::toMap).toList());
            }
            status = switch (g.reason()) {
                case UNKNOWN_ALLOCATION -> 404;
                case RATE_LIMITED -> 429;
                case INVALID_REQUEST -> 400;
                default -> 409;
            };
        } else if (e instanceof ServiceRoutes.MethodNotAllowed) {
            status = 405;
            reason = "METHOD_NOT_ALLOWED";
        } else if (e instanceof NotFound) {
            status = 404;
            reason = "NOT_FOUND";
        } else if (e instanceof TooLarge) {
            status = 413;
            reason = "TOO_LARGE";
        } else if (e instanceof IllegalArgumentException) {
            status = 400;
            reason = Reason.INVALID_REQUEST.name();
        } else if (e instanceof Jobs.UnknownJob) {
            status = 404;
            reason = "UNKNOWN_JOB";
        } else if (e instanceof Jobs.Unavailable) {
            status = 503;
            reason = "JOBS_UNAVAILABLE";
        } else if (e instanceof CudaResolutionException) { // the job's cuda requirement: no installation serves it
            status = 409;
            reason = "NO_MATCHING_CUDA";
        } else if (e instanceof Jobs.Cancelled) {
            status = 409;
            reason = "CANCELLED";
        } else if (e instanceof FairQueue.ClientGone) {
            status = 400;
            reason = "CLIENT_GONE";
        } else if (e instanceof FairQueue.Dropped) {
            status = 503;
            reason = "SHUTTING_DOWN";
        } else if (e instanceof IllegalStateException) {
            status = 409;
            reason = "CONFLICT";
        } else if (e instanceof LedgerException) {
            status = 503;
            reason = "LEDGER";
        } else if (e instanceof IsolationException) {
            status = 500;
            reason = "ISOLATION";
        } else {
            LOG.warn("node service request failed", e);
            status = 500;
            reason = "INTERNAL";
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("status", status);
        out.put("error", String.valueOf(e.getMessage()));
        out.put("reason", reason);
        out.putAll(m);
        return out;
    }

    /** Answers the error for {@code e}; never throws (a client gone is logged at DEBUG). */
    static void fail(HttpExchange ex, RuntimeException e) {
        Map<String, Object> m = error(e);
        try {
            send(ex, (Integer) m.get("status"), m);
        } catch (IOException | RuntimeException io) {
            LOG.debug("cannot answer {}: {}", m.get("status"), io.toString());
        }
    }
}
