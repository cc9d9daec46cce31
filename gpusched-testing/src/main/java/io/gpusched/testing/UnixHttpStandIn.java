package io.gpusched.testing;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.Channels;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A stand-in HTTP/1.1 server on a Unix socket, for client tests: a JDK {@link ServerSocketChannel} on a
 * {@link UnixDomainSocketAddress}, one thread per connection, each request (head, and a body of its
 * {@code Content-Length}) handed to the test's {@link Handler}, which writes whatever bytes it wants back: a proper
 * answer, garbage, half an answer, nothing at all. Records every request. Depends on the JDK only.
 */
public final class UnixHttpStandIn implements AutoCloseable {

    /**
     * A request as it arrived.
     *
     * @param method  the method
     * @param target  the request target (path and query)
     * @param headers the headers, names in lower case
     * @param body    the body
     */
    public record Request(String method, String target, Map<String, String> headers, byte[] body) {
        /** @return the body as UTF-8 text */
        public String text() {
            return new String(body, StandardCharsets.UTF_8);
        }
    }

    /** Answers one request. */
    public interface Handler {
        /**
         * @param request the request
         * @param reply   where the answer goes
         */
        void handle(Request request, Reply reply) throws Exception;
    }

    /** The connection's output, with helpers for proper answers. */
    public static final class Reply {
        private final OutputStream out;
        private final SocketChannel channel;

        private Reply(OutputStream out, SocketChannel channel) {
            this.out = out;
            this.channel = channel;
        }

        /** Writes raw bytes and flushes. */
        public Reply raw(byte[] bytes) throws IOException {
            out.write(bytes);
            out.flush();
            return this;
        }

        /** Writes raw text (UTF-8) and flushes. */
        public Reply raw(String text) throws IOException {
            return raw(text.getBytes(StandardCharsets.UTF_8));
        }

        /** Writes a whole answer with a Content-Length. */
        public Reply answer(int status, String contentType, String body) throws IOException {
            byte[] b = body.getBytes(StandardCharsets.UTF_8);
            raw("HTTP/1.1 " + status + " " + reason(status) + "\r\nContent-Type: " + contentType
                    + "\r\nContent-Length: " + b.length + "\r\nConnection: close\r\n\r\n");
            return raw(b);
        }

        /** Writes a whole JSON answer. */
        public Reply json(int status, String json) throws IOException {
            return answer(status, "application/json", json);
        }

        /** Writes the head of a chunked answer; then {@link #chunk} and {@link #lastChunk}. */
        public Reply chunkedHead(int status, String contentType) throws IOException {
            return raw("HTTP/1.1 " + status + " " + reason(status) + "\r\nContent-Type: " + contentType
                    + "\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
        }

        /** Writes one chunk of a chunked answer. */
        public Reply chunk(String text) throws IOException {
            byte[] b = text.getBytes(StandardCharsets.UTF_8);
            raw(Integer.toHexString(b.length) + "\r\n");
            raw(b);
            return raw("\r\n");
        }

        /** Ends a chunked answer. */
        public Reply lastChunk() throws IOException {
            return raw("0\r\n\r\n");
        }

        /** Closes the connection now. */
        public void close() throws IOException {
            channel.close();
        }

        /** @return whether the client is still connected (a read would not see the end of the stream) */
        public boolean open() {
            return channel.isOpen();
        }

        private static String reason(int status) {
            return switch (status) {
                case 200 -> "OK";
                case 201 -> "Created";
                case 400 -> "Bad Request";
                case 403 -> "Forbidden";
                case 404 -> "Not Found";
                case 409 -> "Conflict";
                case 413 -> "Payload Too Large";
                case 429 -> "Too Many Requests";
                case 503 -> "Service Unavailable";
                default -> "Status";
            };
        }
    }

    private final Path socket;
    private final ServerSocketChannel server;
    private final Handler handler;
    private final List<Request> requests = new CopyOnWriteArrayList<>();
    private final List<SocketChannel> connections = new CopyOnWriteArrayList<>();
    private final AtomicInteger accepted = new AtomicInteger();
    private final Thread acceptor;
    private volatile boolean closed;

    /**
     * Listens on {@code socket} (a file that does not exist yet) and serves until closed.
     *
     * @param socket  where to listen
     * @param handler what answers each request
     */
    public UnixHttpStandIn(Path socket, Handler handler) throws IOException {
        this.socket = socket;
        this.handler = handler;
        this.server = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
        server.bind(UnixDomainSocketAddress.of(socket));
        this.acceptor = new Thread(this::accept, "stand-in-accept");
        acceptor.setDaemon(true);
        acceptor.start();
    }

    private void accept() {
        while (!closed) {
            SocketChannel c;
            try {
                c = server.accept();
            } catch (IOException e) {
                return;
            }
            accepted.incrementAndGet();
            connections.add(c);
            Thread t = new Thread(() -> serve(c), "stand-in-conn");
            t.setDaemon(true);
            t.start();
        }
    }

    private void serve(SocketChannel c) {
        try (c) {
            InputStream in = Channels.newInputStream(c);
            Request r = read(in);
            if (r == null) {
                return;
            }
            requests.add(r);
            handler.handle(r, new Reply(Channels.newOutputStream(c), c));
        } catch (Exception e) {
            // the client went away, or the handler closed the connection
        } finally {
            connections.remove(c);
        }
    }

    private static Request read(InputStream in) throws IOException {
        ByteArrayOutputStream head = new ByteArrayOutputStream();
        int state = 0;
        while (state < 4) {
            int b = in.read();
            if (b < 0) {
                return null;
            }
            head.write(b);
            state = (b == '\r' && (state == 0 || state == 2)) || (b == '\n' && (state == 1 || state == 3))
                    ? state + 1 : b == '\r' ? 1 : 0;
            if (head.size() > 1 << 20) {
                return null;
            }
        }
        String[] lines = head.toString(StandardCharsets.ISO_8859_1).split("\r\n");
        String[] start = lines[0].split(" ");
        Map<String, String> headers = new LinkedHashMap<>();
        for (int i = 1; i < lines.length; i++) {
            int colon = lines[i].indexOf(':');
            if (colon > 0) {
                headers.put(lines[i].substring(0, colon).strip().toLowerCase(Locale.ROOT),
                        lines[i].substring(colon + 1).strip());
            }
        }
        int length = Integer.parseInt(headers.getOrDefault("content-length", "0"));
        byte[] body = in.readNBytes(length);
        return new Request(start[0], start.length > 1 ? start[1] : "", headers, body);
    }

    /** @return the socket */
    public Path socket() {
        return socket;
    }

    /** @return every request received, in order */
    public List<Request> requests() {
        return Collections.unmodifiableList(new ArrayList<>(requests));
    }

    /** @return how many connections were accepted */
    public int accepted() {
        return accepted.get();
    }

    /** @return how many connections are open now */
    public int open() {
        return connections.size();
    }

    /** Stops listening, closes every connection and removes the socket file. */
    @Override
    public void close() throws IOException {
        closed = true;
        server.close();
        for (SocketChannel c : connections) {
            c.close();
        }
        Files.deleteIfExists(socket);
    }
}
