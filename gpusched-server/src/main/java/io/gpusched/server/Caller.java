package io.gpusched.server;

import com.sun.net.httpserver.HttpExchange;
import java.util.List;
import java.util.Objects;

/**
 * Who sent a request, as the kernel says: on the node service's Unix socket, the peer credentials of the connection
 * ({@code SO_PEERCRED}, read when it was accepted) with the user and group names looked up from them; never a field of
 * the request. On the TCP console, the holder of the console token (an admin), or an anonymous reader.
 *
 * @param uid    the caller's uid ({@code -1} for an anonymous reader)
 * @param gid    the caller's primary gid ({@code -1} for an anonymous reader)
 * @param user   the user name ({@code "root (console token)"} for the token holder, {@code "anonymous"} for a reader)
 * @param groups the names of the caller's groups, primary and supplementary
 * @param admin  whether the caller may act on anyone's allocations and jobs: uid 0, a member of the admin group, or the
 *               console token's holder
 */
public record Caller(long uid, long gid, String user, List<String> groups, boolean admin) {
    /** The exchange attribute {@link ConsoleServer} sets on every request before any handler runs. */
    static final String ATTRIBUTE = Caller.class.getName();

    /** Copies the list. */
    public Caller {
        Objects.requireNonNull(user, "user");
        groups = List.copyOf(groups);
    }

    /** @return the console token's holder: an admin acting as root */
    public static Caller consoleToken() {
        return new Caller(0, 0, "root (console token)", List.of(), true);
    }

    /**
     * The caller of a request {@link ConsoleServer} serves, set by the server before any filter of the host's or
     * handler runs; nothing in the request can set or change it.
     *
     * @param exchange a request the console is serving
     * @return its caller
     * @throws IllegalStateException when the exchange was not served by a {@link ConsoleServer}
     */
    public static Caller of(HttpExchange exchange) {
        if (exchange.getAttribute(ATTRIBUTE) instanceof Caller c) {
            return c;
        }
        throw new IllegalStateException("no caller on this exchange: it was not served by a ConsoleServer");
    }

    /** @return a reader without identity (a TCP request without the token) */
    public static Caller anonymous() {
        return new Caller(-1, -1, "anonymous", List.of(), false);
    }

    /** @return whether the kernel vouched for this caller's uid (a socket peer, not a token or an anonymous reader) */
    public boolean identified() {
        return uid >= 0 && !user.equals(consoleToken().user());
    }
}
