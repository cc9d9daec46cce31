package io.gpusched.server;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.UserPrincipal;
import jdk.net.ExtendedSocketOptions;
import jdk.net.UnixDomainPrincipal;

/**
 * The kernel's word on who is at the other end of a Unix socket: {@code SO_PEERCRED}, through
 * {@link ExtendedSocketOptions#SO_PEERCRED} (JDK 16+). The credentials are those of the peer when it connected; the
 * JDK gives uid and gid, no pid.
 *
 * <p>The JDK's {@link UnixDomainPrincipal} holds them as a user and a group principal whose public face is a name
 * (looked up with {@code getpwuid}; the number itself when there is no entry). The number is what identity rests on,
 * and the JDK's Unix principals carry it as their hash code (the uid or gid, for every principal but the special
 * {@code OWNER@}-style ones). That is an implementation detail, so {@link #selfCheck} proves it on this JDK before the
 * socket is served: it connects to a socket of its own and compares what it reads with this process's effective uid
 * and gid from {@code /proc/self/status}. A JDK where the check fails is refused, never guessed around.
 */
final class PeerCredentials {
    private PeerCredentials() {
    }

    /**
     * A peer as the kernel reported it.
     *
     * @param uid the peer's effective uid when it connected
     * @param gid the peer's effective gid when it connected
     */
    record Peer(long uid, long gid) {
    }

    /**
     * @param channel a connected Unix socket
     * @return its peer's credentials
     * @throws IOException when the kernel does not give them
     */
    static Peer of(SocketChannel channel) throws IOException {
        UnixDomainPrincipal p = channel.getOption(ExtendedSocketOptions.SO_PEERCRED);
        return new Peer(id(p.user()), id(p.group()));
    }

    private static long id(UserPrincipal p) {
        return Integer.toUnsignedLong(p.hashCode());
    }

    /**
     * Proves {@link #of} on this JDK: binds a socket at {@code path}, connects to it, and compares the peer read on
     * the accepted side with this process's effective uid and gid. The socket file is removed afterwards.
     *
     * @param path where to bind (in a directory only this process uses)
     * @throws IllegalStateException when the credentials read are not this process's (this JDK's principals do not
     *     carry the ids as expected): the Unix socket must not be served
     */
    static void selfCheck(Path path) {
        long[] mine = effectiveIds();
        try (ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
            server.bind(UnixDomainSocketAddress.of(path), 1);
            SocketChannel client = SocketChannel.open(UnixDomainSocketAddress.of(path));
            try (client; SocketChannel accepted = server.accept()) {
                Peer p = of(accepted);
                if (p.uid() != mine[0] || p.gid() != mine[1]) {
                    throw new IllegalStateException("this JDK (" + System.getProperty("java.vm.version") + ") reports"
                            + " SO_PEERCRED as uid " + p.uid() + " gid " + p.gid() + " for this process, whose"
                            + " effective uid and gid are " + mine[0] + " and " + mine[1] + "; callers on the Unix"
                            + " socket cannot be identified, so it is not served");
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot check peer credentials on " + path + ": " + e, e);
        } finally {
            try {
                Files.deleteIfExists(path);
            } catch (IOException ignored) {
                // in the private bind directory, removed with it
            }
        }
    }

    /** @return this process's effective uid and gid, from /proc/self/status (the kernel's, not the JDK's) */
    static long[] effectiveIds() {
        try {
            long uid = -1;
            long gid = -1;
            for (String line : Files.readAllLines(Path.of("/proc/self/status"), StandardCharsets.US_ASCII)) {
                if (line.startsWith("Uid:")) {
                    uid = Long.parseLong(line.split("\\s+")[2]);
                } else if (line.startsWith("Gid:")) {
                    gid = Long.parseLong(line.split("\\s+")[2]);
                }
            }
            if (uid < 0 || gid < 0) {
                throw new IllegalStateException("/proc/self/status has no Uid or Gid line");
            }
            return new long[]{uid, gid};
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read /proc/self/status: " + e, e);
        }
    }
}
