package io.gpusched.server;

import com.sun.net.httpserver.Filter;
import com.sun.net.httpserver.HttpContext;
import com.sun.net.httpserver.HttpHandler;
import io.gpusched.server.ClientConnectionFactory.Transport;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.eclipse.jetty.http.HttpCompliance;
import org.eclipse.jetty.http.spi.JettyHttpServer;
import org.eclipse.jetty.server.HttpConfiguration;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.server.handler.ContextHandlerCollection;
import org.eclipse.jetty.unixdomain.server.UnixDomainServerConnector;
import org.eclipse.jetty.util.thread.QueuedThreadPool;

/**
 * The console's transport: one Jetty server, one route table (the JDK-API handler and filters, through
 * {@code jetty-http-spi}) behind a TCP connector and, when asked, a Unix-socket connector. Jetty parses requests
 * without a thread per connection (a client that stalls mid-request holds a connection, not a worker) and closes
 * connections idle past {@code idleTimeout}, also in the middle of a request.
 */
final class JettyTransport {
    private final Server server;
    private final ServerConnector tcp;
    private final UnixDomainServerConnector unix;
    private final UnixSocketFile socketFile;
    private final QueuedThreadPool pool;

    /**
     * @param listen      the TCP address
     * @param socketFile  the Unix socket to serve too, or null
     * @param maxThreads  most worker threads (requests being handled, event streams, plus Jetty's own few)
     * @param idleTimeout how long a connection may stay silent (also mid-request) before it is closed
     * @param handler     the route table
     * @param filters     the filters, outermost first
     */
    JettyTransport(InetSocketAddress listen, UnixSocketFile socketFile, int maxThreads, Duration idleTimeout,
            HttpHandler handler, List<Filter> filters) {
        pool = new QueuedThreadPool(maxThreads, Math.min(4, maxThreads), 30_000);
        pool.setName("gpusched-console-http");
        pool.setDaemon(true);
        pool.setReservedThreads(0);
        server = new Server(pool);
        server.setHandler(new ContextHandlerCollection());
        server.setErrorHandler(new JsonErrorHandler());
        server.setStopTimeout(0);
        HttpConfiguration config = new HttpConfiguration();
        config.setSendServerVersion(false);
        config.setSendXPoweredBy(false);
        config.setIdleTimeout(idleTimeout.toMillis());
        // a Host Jetty finds unsafe goes on to the console's own Host rule, which refuses it naming it (421)
        config.setHttpCompliance(HttpCompliance.RFC9110.with("gpusched", HttpCompliance.Violation.UNSAFE_HOST_HEADER));
        tcp = new ServerConnector(server, 1, 1, new ClientConnectionFactory(config, Transport.TCP));
        tcp.setHost(listen.getAddress().getHostAddress());
        tcp.setPort(listen.getPort());
        tcp.setAcceptQueueSize(256);
        tcp.setIdleTimeout(idleTimeout.toMillis());
        tcp.setReuseAddress(true);
        server.addConnector(tcp);
        this.socketFile = socketFile;
        if (socketFile != null) {
            unix = new UnixDomainServerConnector(server, 1, 1, new ClientConnectionFactory(config, Transport.UNIX));
            unix.setAcceptQueueSize(256);
            unix.setIdleTimeout(idleTimeout.toMillis());
            server.addConnector(unix);
        } else {
            unix = null;
        }
        JettyHttpServer spi = new JettyHttpServer(server, true);
        HttpContext context = spi.createContext("/", handler);
        context.getFilters().addAll(filters);
    }

    /**
     * Binds and starts serving; on failure nothing is left listening or bound.
     *
     * @throws UncheckedIOException when an address or the socket cannot be bound
     * @throws IllegalStateException when the socket path is unsafe or taken
     */
    void start() {
        Path bound = null;
        try {
            if (unix != null) {
                bound = socketFile.prepare();
                PeerCredentials.selfCheck(bound.resolveSibling("check"));
                unix.setUnixDomainPath(bound);
            }
            try {
                server.start();
            } catch (Exception e) {
                throw new UncheckedIOException("cannot listen on " + tcp.getHost() + ":" + tcp.getPort()
                        + (unix != null ? " and " + socketFile.path() : "") + ": " + e.getMessage(),
                        e instanceof IOException io ? io : new IOException(e));
            }
            if (unix != null) {
                socketFile.publish(bound);
            }
        } catch (RuntimeException | Error e) {
            stop();
            throw e;
        }
    }

    /** @return the TCP port bound (the real one when 0 was asked for) */
    int port() {
        return tcp.getLocalPort();
    }

    /** @return the Unix socket's path, or null when none is served */
    Path socketPath() {
        return socketFile == null ? null : socketFile.path();
    }

    /** @return connections open on TCP (for tests) */
    int tcpConnections() {
        return tcp.getConnectedEndPoints().size();
    }

    /** @return connections open on the Unix socket (for tests) */
    int unixConnections() {
        return unix == null ? 0 : unix.getConnectedEndPoints().size();
    }

    /** @return the worker pool's threads (for tests) */
    int threads() {
        return pool.getThreads();
    }

    /** Stops serving: closes every connection and removes the socket file; never throws. */
    void stop() {
        try {
            server.stop();
        } catch (Exception e) {
            // stopping: nothing more to do for it
        }
        if (socketFile != null) {
            socketFile.remove();
        }
    }
}
