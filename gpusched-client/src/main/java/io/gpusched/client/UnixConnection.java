package io.gpusched.client;

import java.io.Closeable;
import java.io.IOException;
import java.net.ConnectException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.ClosedSelectorException;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.nio.file.AccessDeniedException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/**
 * One connection to the node service's Unix socket: a JDK {@link SocketChannel} ({@link UnixDomainSocketAddress}),
 * non-blocking under a {@link Selector} so that every wait has a limit. Connect, write a request, read the answer with
 * an idle limit (how long without a byte) and an overall deadline.
 */
final class UnixConnection implements Closeable, ByteSource {
    private static final int S_IFMT = 0170000;
    private static final int S_IFSOCK = 0140000;

    private final Path socket;
    private final SocketChannel channel;
    private final Selector selector;
    private volatile long idleNanos;
    private volatile long deadline = Long.MAX_VALUE;

    private UnixConnection(Path socket, SocketChannel channel, Selector selector) {
        this.socket = socket;
        this.channel = channel;
        this.selector = selector;
    }

    /**
     * @param socket       the service's socket
     * @param timeoutNanos how long to try (a full listen backlog makes a connection wait)
     * @return the connection
     * @throws NodeServiceException ({@code UNREACHABLE}, {@code NOT_PERMITTED} or {@code TIMEOUT}) naming the socket
     */
    static UnixConnection open(Path socket, long timeoutNanos) {
        checkIsSocket(socket);
        long until = System.nanoTime() + timeoutNanos;
        while (true) {
            SocketChannel ch = null;
            Selector sel = null;
            try {
                ch = SocketChannel.open(StandardProtocolFamily.UNIX);
                sel = Selector.open();
                ch.configureBlocking(false);
                boolean connected = ch.connect(UnixDomainSocketAddress.of(socket));
                if (!connected) {
                    ch.register(sel, SelectionKey.OP_CONNECT);
                    while (!ch.finishConnect()) {
                        long left = until - System.nanoTime();
                        if (left <= 0) {
                            throw timeout(socket, "did not accept a connection within "
                                    + millis(timeoutNanos) + " (it hangs, or its backlog is full)");
                        }
                        sel.select(Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
                        sel.selectedKeys().clear();
                    }
                }
                return new UnixConnection(socket, ch, sel);
            } catch (NodeServiceException e) {
                closeQuietly(ch, sel);
                throw e;
            } catch (IOException e) {
                closeQuietly(ch, sel);
                // a full listen backlog is EAGAIN for a non-blocking AF_UNIX connect (and the JDK closes the
                // channel): wait a little and try again on a new one, until the time is up
                if (String.valueOf(e.getMessage()).contains("temporarily unavailable")) {
                    if (System.nanoTime() - until >= 0) {
                        throw timeout(socket, "did not accept a connection within " + millis(timeoutNanos)
                                + " (its backlog stays full: it is overloaded, or hangs)");
                    }
                    pause(10);
                    continue;
                }
                throw unreachable(socket, e);
            }
        }
    }

    /** Refuses, naming it, a path that is missing or not a socket (a regular file, a directory, a FIFO, ...). */
    static void checkIsSocket(Path socket) {
        int mode;
        try {
            mode = (Integer) Files.getAttribute(socket, "unix:mode");
        } catch (NoSuchFileException e) {
            throw new NodeServiceException(NodeServiceException.Kind.UNREACHABLE, socket, 0, "UNREACHABLE",
                    "no node service socket at " + socket + " (no such file)", e);
        } catch (AccessDeniedException e) {
            throw new NodeServiceException(NodeServiceException.Kind.NOT_PERMITTED, socket, 0, "NOT_PERMITTED",
                    "cannot reach the node service socket " + socket + ": permission denied on a directory above it",
                    e);
        } catch (IOException | UnsupportedOperationException | ClassCastException e) {
            throw new NodeServiceException(NodeServiceException.Kind.UNREACHABLE, socket, 0, "UNREACHABLE",
                    "cannot read the node service socket " + socket + ": " + e.getMessage(), e);
        }
        if ((mode & S_IFMT) != S_IFSOCK) {
            String what = switch (mode & S_IFMT) {
                case 0100000 -> "a regular file";
                case 0040000 -> "a directory";
                case 0010000 -> "a FIFO";
                case 0020000 -> "a character device";
                case 0060000 -> "a block device";
                default -> "not a socket";
            };
            throw new NodeServiceException(NodeServiceException.Kind.UNREACHABLE, socket, 0, "NOT_A_SOCKET",
                    socket + " is " + what + ", not a socket: no node service listens there (remove it, or point"
                            + " GPUSCHED_SOCKET at the service's socket)",
                    null);
        }
    }

    private static NodeServiceException unreachable(Path socket, IOException e) {
        String m = String.valueOf(e.getMessage());
        if (e instanceof AccessDeniedException || m.contains("Permission denied")) {
            return new NodeServiceException(NodeServiceException.Kind.NOT_PERMITTED, socket, 0, "NOT_PERMITTED",
                    "cannot connect to the node service on " + socket + ": permission denied (the service admits only"
                            + " its socket group; ask an admin to add you to it)",
                    e);
        }
        String why = e instanceof ConnectException || m.contains("Connection refused")
                ? "connection refused: no service is listening (it stopped, or was killed)" : m;
        return new NodeServiceException(NodeServiceException.Kind.UNREACHABLE, socket, 0, "UNREACHABLE",
                "cannot connect to the node service on " + socket + ": " + why, e);
    }

    private static NodeServiceException timeout(Path socket, String what) {
        return new NodeServiceException(NodeServiceException.Kind.TIMEOUT, socket, 0, "TIMEOUT",
                "the node service on " + socket + " " + what, null);
    }

    private static String millis(long nanos) {
        long ms = TimeUnit.NANOSECONDS.toMillis(nanos);
        return ms % 1000 == 0 ? ms / 1000 + " s" : ms + " ms";
    }

    /**
     * Sets the read limits.
     *
     * @param idle     how long one read may wait for a byte, in nanoseconds; 0: no limit
     * @param until    {@link System#nanoTime()} by which the answer must be read; {@link Long#MAX_VALUE}: no limit
     */
    void limits(long idle, long until) {
        this.idleNanos = idle;
        this.deadline = until;
    }

    /** Writes all of {@code bytes}, failing when the service does not take them before {@code until}. */
    void write(byte[] bytes, long until) throws IOException {
        ByteBuffer b = ByteBuffer.wrap(bytes);
        SelectionKey key = channel.register(selector, SelectionKey.OP_WRITE);
        try {
            while (b.hasRemaining()) {
                if (channel.write(b) == 0) {
                    long left = until - System.nanoTime();
                    if (left <= 0) {
                        throw timeout(socket, "did not read the request within its time limit (it stalls)");
                    }
                    selector.select(Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
                    selector.selectedKeys().clear();
                }
            }
        } finally {
            if (key.isValid()) {
                key.interestOps(0);
            }
        }
    }

    @Override
    public int read(byte[] b, int off, int len) throws IOException {
        if (len == 0) {
            return 0;
        }
        ByteBuffer buf = ByteBuffer.wrap(b, off, len);
        long started = System.nanoTime();
        SelectionKey key;
        try {
            key = channel.register(selector, SelectionKey.OP_READ);
        } catch (ClosedChannelException | ClosedSelectorException e) {
            throw closed(e);
        }
        try {
            while (true) {
                int n;
                try {
                    n = channel.read(buf);
                } catch (ClosedChannelException e) {
                    throw closed(e);
                }
                if (n != 0) {
                    return n;
                }
                long now = System.nanoTime();
                long idleLeft = idleNanos > 0 ? started + idleNanos - now : Long.MAX_VALUE;
                long deadlineLeft = deadline != Long.MAX_VALUE ? deadline - now : Long.MAX_VALUE;
                if (idleLeft <= 0) {
                    throw timeout(socket, "sent nothing for " + millis(idleNanos) + " (it hangs, or is overloaded);"
                            + " try again, or ask an admin to look at it");
                }
                if (deadlineLeft <= 0) {
                    throw timeout(socket, "did not finish its answer within its time limit (it hangs, or is"
                            + " overloaded); try again, or ask an admin to look at it");
                }
                long left = Math.min(idleLeft, deadlineLeft);
                try {
                    selector.select(left == Long.MAX_VALUE ? 0 : Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
                    selector.selectedKeys().clear();
                } catch (ClosedSelectorException e) {
                    throw closed(e);
                }
                if (!channel.isOpen()) {
                    throw closed(null);
                }
                if (Thread.currentThread().isInterrupted()) {
                    throw new NodeServiceException(NodeServiceException.Kind.CONNECTION_LOST, socket, 0,
                            "INTERRUPTED", "interrupted while waiting for the node service on " + socket, null);
                }
            }
        } finally {
            if (key.isValid()) {
                key.interestOps(0);
            }
        }
    }

    private NodeServiceException closed(Exception e) {
        return new NodeServiceException(NodeServiceException.Kind.CONNECTION_LOST, socket, 0, "CONNECTION_LOST",
                "the connection to the node service on " + socket + " was closed by this client", e);
    }

    /** @return the socket */
    Path socket() {
        return socket;
    }

    /** Closes the connection; a read in progress on another thread ends with {@code CONNECTION_LOST}. */
    @Override
    public void close() {
        try {
            channel.close();
        } catch (IOException ignored) {
            // closing
        }
        selector.wakeup();
        try {
            selector.close();
        } catch (IOException ignored) {
            // closing
        }
    }

    private static void closeQuietly(SocketChannel ch, Selector sel) {
        try {
            if (sel != null) {
                sel.close();
            }
            if (ch != null) {
                ch.close();
            }
        } catch (IOException ignored) {
            // closing
        }
    }

    private static void pause(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while connecting", e);
        }
    }
}
