package io.gpusched.server;

import com.sun.net.httpserver.Filter;
import com.sun.net.httpserver.HttpExchange;
import java.io.IOException;

/**
 * Bearer-token authorization: every change (any method but GET and HEAD) needs {@code Authorization: Bearer <token>}
 * (401 with {@code WWW-Authenticate} otherwise, the body drained); reads from loopback clients are open, reads from
 * beyond this host need the token too. No cookie is read, so there is no CSRF. TCP only: on the node service's Unix
 * socket the caller is the connection's peer ({@link IdentityFilter}) and the routes decide what it may do.
 */
final class BearerAuthFilter extends Filter {
    private final ApiToken token;
    private final int maxBodyBytes;

    /**
     * @param token        the token changes need
     * @param maxBodyBytes how much of a refused change's body is drained
     */
    BearerAuthFilter(ApiToken token, int maxBodyBytes) {
        this.token = token;
        this.maxBodyBytes = maxBodyBytes;
    }

    @Override
    public void doFilter(HttpExchange ex, Chain chain) throws IOException {
        if (IdentityFilter.unix(ex)) { // the caller is the peer (IdentityFilter); the routes decide what it may do
            chain.doFilter(ex);
            return;
        }
        String method = ex.getRequestMethod();
        boolean loopback = ex.getRemoteAddress().getAddress().isLoopbackAddress();
        boolean authorized = token.accepts(ex.getRequestHeaders().getFirst("Authorization"));
        boolean change = !method.equals("GET") && !method.equals("HEAD");
        if (change && !authorized) {
            ex.getResponseHeaders().set("WWW-Authenticate", "Bearer realm=\"gpusched\"");
            Exchanges.drain(ex, maxBodyBytes);
            Exchanges.error(ex, 401, "changes need Authorization: Bearer <token> (the token is in "
                    + token.file() + ")", null);
            return;
        }
        if (!change && !loopback && !authorized) {
            Exchanges.error(ex, 401, "reads from beyond this host need the bearer token too", null);
            return;
        }
        chain.doFilter(ex);
    }

    @Override
    public String description() {
        return "gpusched console: bearer token for changes and for reads from beyond this host";
    }
}
