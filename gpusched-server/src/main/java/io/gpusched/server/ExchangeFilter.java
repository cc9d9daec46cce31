package io.gpusched.server;

import com.sun.net.httpserver.Filter;
import com.sun.net.httpserver.HttpExchange;
import java.io.IOException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The console's outermost filter: sets the headers every response carries ({@code nosniff}, no referrer), turns what
 * a handler or an inner filter throws into a JSON error (413 for a body over the limit, 400 for bad input, 500 with a
 * WARN for anything else) and closes the exchange, except an event stream's, which its handler owns.
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
        } finally {
            if (!Exchanges.EVENT_STREAM.equals(ex.getResponseHeaders().getFirst("Content-Type"))) {
                ex.close();
            }
        }
    }

    @Override
    public String description() {
        return "gpusched console: common headers, errors as JSON, exchange closed";
    }
}
