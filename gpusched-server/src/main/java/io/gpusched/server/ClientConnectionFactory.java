package io.gpusched.server;

import com.sun.net.httpserver.HttpExchange;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.OptionalLong;
import java.util.WeakHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.eclipse.jetty.http.spi.JettyHttpExchange;
import org.eclipse.jetty.io.AbstractConnection;
import org.eclipse.jetty.io.Connection;
import org.eclipse.jetty.io.EndPoint;
import org.eclipse.jetty.io.SocketChannelEndPoint;
import org.eclipse.jetty.server.ConnectionMetaData;
import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.HttpConfiguration;
import org.eclipse.jetty.server.HttpConnectionFactory;
import org.eclipse.jetty.server.Request;
import org.eclipse.jetty.util.BufferUtil;
import org.eclipse.jetty.util.Callback;

/**
 * HTTP/1.1 connections that know their client from the moment they are accepted: on the Unix socket, the peer
 * credentials ({@link PeerCredentials}, read once, here); on TCP, the uid owning the client's socket when it is on
 * this host ({@link TcpOwners}), else its address. The client is kept on the connection (a Jetty connection attribute,
 * which nothing a client sends can set) and read back by the filters through {@link #client(HttpExchange)}. A
 * connection whose peer credentials cannot be read is closed at once.
 *
 * <p>Each connection takes a slot of {@link ClientLimits} (all clients together, then its client's) for its life. One
 * over a limit is answered {@code 429 TOO_MANY_CONNECTIONS} naming the limit, by a connection that never parses HTTP
 * nor runs a handler (it reads and drops what the client sends for at most a second, so the client sees the answer
 * rather than a reset, then closes); past {@value #MAX_REFUSING} such answers in flight, a connection is closed at
 * once.
 */
class ClientConnectionFactory extends HttpConnectionFactory {
    static final String ATTRIBUTE = ClientConnectionFactory.class.getName() + ".client";
    /** Refused connections still answering; past this, refused ones are closed without an answer. */
    static final int MAX_REFUSING = 1024;

    /** The transport a request came on. */
    enum Transport {
        TCP,
        UNIX
    }

    /**
     * A connection's client.
     *
     * @param transport the socket it came on
     * @param uid       the peer's uid on the Unix socket (the kernel's); on TCP the owner of the client's socket when
     *                  it is on this host; else -1
     * @param gid       the peer's gid on the Unix socket; -1 on TCP
     * @param address   the remote address on TCP, null on the Unix socket
     */
    record Client(Transport transport, long uid, long gid, InetSocketAddress address) {
        /** @return what the per-client limits count by: the uid when known, else the remote address */
        String key() {
            return uid >= 0 ? "uid:" + uid : "ip:" + address.getAddress().getHostAddress();
        }

        /** @return whether the per-client limits pass this client by (root) */
        boolean exempt() {
            return uid == 0;
        }

        /** @return a short, printable name for logs and errors */
        String describe() {
            if (transport == Transport.UNIX) {
                return "uid " + uid;
            }
            String ip = address.getAddress().getHostAddress();
            return uid >= 0 ? "uid " + uid + " (TCP from " + ip + ")" : "TCP client " + ip;
        }
    }

    private final Transport transport;
    private final ClientLimits limits;
    private final TcpOwners owners;
    private final AtomicInteger refusing = new AtomicInteger();
    /** clients identified by {@link #accepted}, until their connection is made (weak: a channel that never gets one) */
    private final Map<SocketChannel, Object> pending = Collections.synchronizedMap(new WeakHashMap<>());

    ClientConnectionFactory(HttpConfiguration config, Transport transport, ClientLimits limits, TcpOwners owners) {
        super(config);
        this.transport = transport;
        this.limits = limits;
        this.owners = owners;
    }

    /**
     * Identifies a connection's client as it is accepted, on the connector's acceptor thread (so a flood of
     * connections waits in the kernel's backlog, not in a growing crowd of worker threads); {@link #newConnection}
     * picks the result up.
     */
    void accepted(SocketChannel channel) {
        Object who;
        try {
            who = identify(channel);
        } catch (IOException | RuntimeException e) {
            who = e;
        }
        pending.put(channel, who);
    }

    @Override
    public Connection newConnection(Connector connector, EndPoint endPoint) {
        Client client;
        try {
            if (!(endPoint instanceof SocketChannelEndPoint s)) {
                throw new IOException("not a socket channel: " + endPoint.getClass().getName());
            }
            SocketChannel channel = (SocketChannel) s.getChannel();
            Object who = pending.remove(channel);
            if (who == null) {
                who = identify(channel);
            }
            if (who instanceof Exception e) {
                throw e;
            }
            client = (Client) who;
        } catch (Exception e) {
            endPoint.close(e);
            throw new IllegalStateException("connection refused: cannot identify its client: " + e, e);
        }
        String refusal = limits.acquireConnection(client);
        if (refusal != null) {
            return refuse(connector, endPoint, refusal);
        }
        Connection c;
        try {
            c = super.newConnection(connector, endPoint);
        } catch (RuntimeException | Error e) {
            limits.releaseConnection(client);
            throw e;
        }
        ((ConnectionMetaData) c).setAttribute(ATTRIBUTE, client);
        c.addEventListener(new Connection.Listener() {
            @Override
            public void onClosed(Connection connection) {
                limits.releaseConnection(client);
            }
        });
        return c;
    }

    private Connection refuse(Connector connector, EndPoint endPoint, String refusal) {
        if (refusing.incrementAndGet() > MAX_REFUSING) {
            refusing.decrementAndGet();
            return new Refused(endPoint, connector, null, refusing); // closes at once, when opened
        }
        return new Refused(endPoint, connector, answer(refusal), refusing);
    }

    /** @return a whole 429 response naming the limit, for a connection that never reaches HTTP parsing */
    static ByteBuffer answer(String refusal) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("status", 429);
        m.put("error", refusal);
        m.put("reason", "TOO_MANY_CONNECTIONS");
        byte[] body = Views.json(m).getBytes(StandardCharsets.UTF_8);
        String head = "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nCache-Control: no-store\r\n"
                + "Retry-After: 1\r\nConnection: close\r\nContent-Length: " + body.length + "\r\n\r\n";
        ByteBuffer b = ByteBuffer.allocate(head.length() + body.length);
        b.put(head.getBytes(StandardCharsets.US_ASCII)).put(body).flip();
        return b;
    }

    /** A refused connection: writes its answer, drops what it reads for at most a second, closes. */
    private static final class Refused extends AbstractConnection {
        private final ByteBuffer answer;
        private final AtomicInteger refusing;
        private final ByteBuffer sink = ByteBuffer.allocate(4096);
        private boolean counted = true;

        Refused(EndPoint endPoint, Connector connector, ByteBuffer answer, AtomicInteger refusing) {
            super(endPoint, connector.getExecutor());
            this.answer = answer;
            this.refusing = refusing;
            if (answer == null) {
                counted = false; // already given back: closed at once
            }
        }

        @Override
        public void onOpen() {
            super.onOpen();
            EndPoint e = getEndPoint();
            if (answer == null) {
                e.close();
                return;
            }
            e.setIdleTimeout(1000);
            e.write(Callback.from(() -> {
                e.shutdownOutput();
                fillInterested();
            }, x -> e.close()), answer);
        }

        @Override
        public void onFillable() {
            EndPoint e = getEndPoint();
            try {
                while (true) {
                    BufferUtil.clear(sink);
                    int n = e.fill(sink);
                    if (n < 0) {
                        e.close();
                        return;
                    }
                    if (n == 0) {
                        fillInterested();
                        return;
                    }
                }
            } catch (IOException x) {
                e.close();
            }
        }

        @Override
        public void onClose(Throwable cause) {
            super.onClose(cause);
            if (counted) {
                counted = false;
                refusing.decrementAndGet();
            }
        }
    }

    private Client identify(SocketChannel channel) throws IOException {
        if (transport == Transport.UNIX) {
            PeerCredentials.Peer p = PeerCredentials.of(channel);
            return new Client(Transport.UNIX, p.uid(), p.gid(), null);
        }
        SocketAddress remote = channel.getRemoteAddress();
        SocketAddress local = channel.getLocalAddress();
        if (!(remote instanceof InetSocketAddress r) || !(local instanceof InetSocketAddress l)) {
            throw new IOException("no remote address on a TCP connection");
        }
        OptionalLong owner = owners.owner(r, l);
        return new Client(Transport.TCP, owner.orElse(-1), -1, r);
    }

    /**
     * @param ex a request the console serves
     * @return its connection's client
     * @throws IllegalStateException when the exchange did not come through a connection of this factory
     */
    static Client client(HttpExchange ex) {
        if (ex instanceof JettyHttpExchange j) {
            Request r = j.getRequest();
            if (r.getConnectionMetaData().getAttribute(ATTRIBUTE) instanceof Client c) {
                return c;
            }
        }
        throw new IllegalStateException("request did not come through the console's connector");
    }
}
