package io.gpusched.server;

import com.sun.net.httpserver.Filter;
import com.sun.net.httpserver.HttpExchange;
import io.gpusched.server.ClientConnectionFactory.Client;
import io.gpusched.server.ClientConnectionFactory.Transport;
import java.io.IOException;

/**
 * Says who sent each request, before any other rule: on the Unix socket the caller is the connection's peer (its uid
 * and gid as the kernel gave them when it connected, names from NSS through {@link CallerResolver}); on TCP, the
 * holder of the console token ({@link Caller#consoleToken()}) when the request carries it, else
 * {@link Caller#anonymous()}. The caller and the connection's client are set as exchange attributes, overwriting
 * anything, so nothing in a request can choose them; handlers read them with {@link Caller#of} and
 * {@link #client(HttpExchange)}.
 */
final class IdentityFilter extends Filter {
    private static final String CLIENT = IdentityFilter.class.getName() + ".client";

    private final CallerResolver resolver;
    private final ApiToken token;

    IdentityFilter(CallerResolver resolver, ApiToken token) {
        this.resolver = resolver;
        this.token = token;
    }

    @Override
    public void doFilter(HttpExchange ex, Chain chain) throws IOException {
        Client client = ClientConnectionFactory.client(ex);
        Caller caller;
        if (client.transport() == Transport.UNIX) {
            caller = resolver.resolve(client.uid(), client.gid());
        } else {
            caller = token.accepts(ex.getRequestHeaders().getFirst("Authorization")) ? Caller.consoleToken()
                    : Caller.anonymous();
        }
        ex.setAttribute(CLIENT, client);
        ex.setAttribute(Caller.ATTRIBUTE, caller);
        chain.doFilter(ex);
    }

    /**
     * @param ex a request that passed this filter
     * @return its connection's client
     */
    static Client client(HttpExchange ex) {
        if (ex.getAttribute(CLIENT) instanceof Client c) {
            return c;
        }
        throw new IllegalStateException("no client on this exchange: the identity filter did not run");
    }

    /** @return whether the request came on the Unix socket */
    static boolean unix(HttpExchange ex) {
        return client(ex).transport() == Transport.UNIX;
    }

    @Override
    public String description() {
        return "gpusched console: the caller (peer credentials on the Unix socket, the token on TCP)";
    }
}
