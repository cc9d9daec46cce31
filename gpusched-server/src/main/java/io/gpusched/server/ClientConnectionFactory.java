package io.gpusched.server;

import com.sun.net.httpserver.HttpExchange;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.channels.SocketChannel;
import org.eclipse.jetty.http.spi.JettyHttpExchange;
import org.eclipse.jetty.io.Connection;
import org.eclipse.jetty.io.EndPoint;
import org.eclipse.jetty.io.SocketChannelEndPoint;
import org.eclipse.jetty.server.ConnectionMetaData;
import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.HttpConfiguration;
import org.eclipse.jetty.server.HttpConnectionFactory;
import org.eclipse.jetty.server.Request;

/**
 * HTTP/1.1 connections that know their client from the moment they are accepted: on the Unix socket, the peer
 * credentials ({@link PeerCredentials}, read once, here); on TCP, the remote address. The client is kept on the
 * connection (a Jetty connection attribute, which nothing a client sends can set) and read back by the filters
 * through {@link #client(HttpExchange)}. A connection whose peer credentials cannot be read is closed at once.
 */
class ClientConnectionFactory extends HttpConnectionFactory {
    static final String ATTRIBUTE = ClientConnectionFactory.class.getName() + ".client";

    /** The transport a request came on. */
    enum Transport {
        TCP,
        UNIX
    }

    /**
     * A connection's client.
     *
     * @param transport the socket it came on
     * @param uid       the peer's uid on the Unix socket (the kernel's); -1 on TCP
     * @param gid       the peer's gid on the Unix socket; -1 on TCP
     * @param address   the remote address on TCP, null on the Unix socket
     */
    record Client(Transport transport, long uid, long gid, InetSocketAddress address) {
        /** @return a short, printable name for logs and errors */
        String describe() {
            return transport == Transport.UNIX ? "uid " + uid : "TCP client " + address.getAddress().getHostAddress();
        }
    }

    private final Transport transport;

    ClientConnectionFactory(HttpConfiguration config, Transport transport) {
        super(config);
        this.transport = transport;
    }

    @Override
    public Connection newConnection(Connector connector, EndPoint endPoint) {
        Client client;
        try {
            client = identify(endPoint);
        } catch (IOException | RuntimeException e) {
            endPoint.close(e);
            throw new IllegalStateException("connection refused: cannot identify its client: " + e, e);
        }
        Connection c = super.newConnection(connector, endPoint);
        ((ConnectionMetaData) c).setAttribute(ATTRIBUTE, client);
        return c;
    }

    private Client identify(EndPoint endPoint) throws IOException {
        if (transport == Transport.UNIX) {
            if (!(endPoint instanceof SocketChannelEndPoint s)) {
                throw new IOException("not a socket channel: " + endPoint.getClass().getName());
            }
            PeerCredentials.Peer p = PeerCredentials.of((SocketChannel) s.getChannel());
            return new Client(Transport.UNIX, p.uid(), p.gid(), null);
        }
        SocketAddress remote = endPoint.getRemoteSocketAddress();
        if (!(remote instanceof InetSocketAddress inet)) {
            throw new IOException("no remote address on a TCP connection");
        }
        return new Client(Transport.TCP, -1, -1, inet);
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
