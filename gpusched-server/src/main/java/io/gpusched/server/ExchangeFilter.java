package io.gpusched.server;

import com.sun.net.httpserver.Filter;
import com.sun.net.httpserver.HttpExchange;
import java.io.IOException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The console's outermost filter: sets the headers every response carries ({@code nosniff}, no referrer), turns what
 * a handler or an inner filter throws into a JSON error (413 for a body over the limit, 400 for bad input or a request
 * that could not be read to its end, 500 with a WARN for anything else, and 500 for a handler that gave no answer) and
 * closes the exchange, except an event stream's, which its handler owns. It also gives the connection its idle
 * timeout back after a handler that kept it open ({@link Exchanges#keepOpen}).
 */
final class ExchangeFilter extends Filter {
    private static final Logger LOG = LoggerFactory.getLogger(ExchangeFilter.class);

    @Override
    public void doFilter(HttpExchange ex, Chain chain) throws IOException {
        try {
            ex.getResponseHeaders().set("X-Content-Type-Options", "nosniff");
            ex.getResponseHeaders().set("Referrer-Policy", "no-referrer");
            chain.doFilter(ex);
        } catch (Exchanges.RequestTooLarge e) {
            Exchanges.error(ex, 413, e.getMessage(), null);
        } catch (IllegalArgumentException e) {
            Exchanges.error(ex, 400, e.getMessage(), null);
        } catch (RuntimeException e) {
            LOG.warn("console request {} {} failed", ex.getRequestMethod(), ex.getRequestURI(), e);
            Exchanges.error(ex, 500, "internal error: " + e, null);
        } catch (IOException e) {
            if (ex.getResponseCode() > 0) {
                throw e; // the answer had begun (an event stream that ended): the server aborts the connection
            }
            // the request could not be read to its end: a body shorter than declared, a client that went silent
            // past the idle timeout mid-body, bad chunked framing
            Exchanges.error(ex, 400, "the request could not be read to its end: " + e.getMessage(),
                    "INVALID_REQUEST");
        } finally {
            Exchanges.restoreIdleTimeout(ex);
            if (ex.getResponseCode() <= 0) { // never the server's default 200 for a handler that gave no answer
                Exchanges.error(ex, 500, "internal error: no answer was given", null);
            }
            if (!Exchanges.EVENT_STREAM.equals(ex.getResponseHeaders().getFirst("Content-Type"))) {
                try {
                    ex.close();
                } catch (RuntimeException gone) { // the client went away before the answer was written
                    LOG.debug("console request {} {}: {}", ex.getRequestMethod(), ex.getRequestURI().getRawPath(),
                            gone.toString());
                }
            }
        }
    }

    @Override
    public String description() {
        return "gpusched console: common headers, errors as JSON, exchange closed";
    }
}
