package io.gpusched.server;

import java.io.BufferedReader;
import java.io.IOException;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.OptionalLong;

/**
 * Who owns the other end of a TCP connection made on this host, as identd finds it: the kernel lists every TCP socket
 * of this network namespace in {@code /proc/net/tcp} and {@code /proc/net/tcp6}, each with its local and remote
 * address and the uid that owns it. The client's own socket is the line whose local address is the connection's
 * remote one and whose remote address is the server's. On loopback every local user is 127.0.0.1, so this is what
 * tells them apart for per-client limits (never for identity: on TCP rights come from the console token only).
 *
 * <p>A client on another host has no such line (empty); so has one that already closed its socket. One read of the
 * files serves every connection of a burst the kernel has already established (a flood of connections costs a read
 * per burst, not per connection); each entry is used once. A read keeps, besides the connection looked up, only the
 * clients whose connection the server has not accepted yet (the server's end is listed with no inode: no file holds
 * it yet): a client of a connection accepted earlier may close, and its address and port then be another user's,
 * so its line is never kept for later.
 */
final class TcpOwners {
    private final Path proc;
    /** client sockets of the last scan, "local remote" to uid; guarded by this */
    private Map<String, Long> snapshot = new HashMap<>();

    /** @param proc the proc file system's root ({@code /proc}; tests give a tree of their own) */
    TcpOwners(Path proc) {
        this.proc = proc;
    }

    /**
     * @param client the connection's remote end (the client's socket address)
     * @param server the connection's local end (the server's socket address)
     * @return the uid owning the client's socket, when it is on this host and still open
     */
    synchronized OptionalLong owner(InetSocketAddress client, InetSocketAddress server) {
        List<String[]> keys = keys(client, server);
        OptionalLong known = take(keys);
        if (known.isPresent()) {
            return known;
        }
        rescan(keys);
        return take(keys);
    }

    /** @return the (local, remote) pairs the client's socket may be listed under, with the file it would be in */
    private static List<String[]> keys(InetSocketAddress client, InetSocketAddress server) {
        InetAddress c = client.getAddress();
        InetAddress s = server.getAddress();
        String cPort = ":" + port(client.getPort());
        String sPort = ":" + port(server.getPort());
        List<String[]> keys = new ArrayList<>();
        if (c instanceof Inet4Address && s instanceof Inet4Address) {
            // an IPv4 client socket is in tcp; an IPv6 one talking to a mapped address is in tcp6
            keys.add(new String[]{"tcp", hex(c.getAddress()) + cPort, hex(s.getAddress()) + sPort});
            keys.add(new String[]{"tcp6", hex(mapped(c.getAddress())) + cPort, hex(mapped(s.getAddress())) + sPort});
        } else {
            keys.add(new String[]{"tcp6", hex(v6(c)) + cPort, hex(v6(s)) + sPort});
        }
        return keys;
    }

    /** Takes the client's entry from the last scan (each connection is looked up once: a later one is new). */
    private OptionalLong take(List<String[]> keys) {
        for (String[] k : keys) {
            Long uid = snapshot.remove(normalized(k[1]) + " " + normalized(k[2]));
            if (uid != null) {
                return OptionalLong.of(uid);
            }
        }
        return OptionalLong.empty();
    }

    /**
     * Reads the files again, keeping the sockets connected to the same server address as the one looked up whose
     * connection the server has not accepted yet, and the one looked up: one read serves every connection of a burst
     * that the kernel has already established, and no line of a connection that may have closed since is kept.
     */
    private void rescan(List<String[]> keys) {
        Map<String, Long> clients = new HashMap<>();
        // the server's ends not yet accepted (no inode), keyed "client server" as the clients' lines are, normalized
        List<String> waiting = new ArrayList<>();
        List<String> servers = new ArrayList<>();
        for (String[] k : keys) {
            servers.add(k[2]);
        }
        for (String file : List.of("tcp", "tcp6")) {
            try (BufferedReader r = Files.newBufferedReader(proc.resolve("net").resolve(file),
                    StandardCharsets.US_ASCII)) {
                String line = r.readLine(); // the header
                while ((line = r.readLine()) != null) {
                    // "sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode"
                    String[] f = line.trim().split("\\s+", 11);
                    if (f.length < 10) {
                        continue;
                    }
                    String local = f[1].toUpperCase(Locale.ROOT);
                    String remote = f[2].toUpperCase(Locale.ROOT);
                    try {
                        if (servers.contains(remote)) {
                            clients.put(normalized(local) + " " + normalized(remote), Long.parseLong(f[7]));
                        } else if (servers.contains(local) && f[9].equals("0")
                                && (f[3].equals("01") || f[3].equals("08"))) {
                            // established (or closed by its client) and still in the accept queue
                            waiting.add(normalized(remote) + " " + normalized(local));
                        }
                    } catch (NumberFormatException e) {
                        // not a line of the kernel's format: skipped
                    }
                }
            } catch (IOException e) {
                // no such file (no IPv6), or no /proc: the client is known by its address
            }
        }
        Map<String, Long> next = new HashMap<>();
        for (String k : waiting) {
            Long uid = clients.get(k);
            if (uid != null) {
                next.put(k, uid);
            }
        }
        // the connection looked up was accepted before this read: its client's line is its own
        Long own = clients.get(normalized(keys.get(0)[1]) + " " + normalized(keys.get(0)[2]));
        if (own != null) {
            next.put(normalized(keys.get(0)[1]) + " " + normalized(keys.get(0)[2]), own);
        }
        snapshot = next;
    }

    /** @return an address and port as tcp6 prints it: an IPv4 one as its mapped IPv6 address */
    private static String normalized(String addressAndPort) {
        int colon = addressAndPort.indexOf(':');
        if (colon != 8) {
            return addressAndPort;
        }
        byte[] v4 = new byte[4];
        boolean little = ByteOrder.nativeOrder() == ByteOrder.LITTLE_ENDIAN;
        for (int i = 0; i < 4; i++) {
            v4[little ? 3 - i : i] = (byte) Integer.parseInt(addressAndPort.substring(2 * i, 2 * i + 2), 16);
        }
        return hex(mapped(v4)) + addressAndPort.substring(colon);
    }

    private static String port(int p) {
        return String.format("%04X", p);
    }

    private static byte[] mapped(byte[] v4) {
        byte[] out = new byte[16];
        out[10] = (byte) 0xff;
        out[11] = (byte) 0xff;
        System.arraycopy(v4, 0, out, 12, 4);
        return out;
    }

    private static byte[] v6(InetAddress a) {
        byte[] b = a.getAddress();
        return b.length == 16 ? b : mapped(b);
    }

    /**
     * @return the address as the kernel prints it: each 32-bit word as a number in this host's byte order, in hex
     */
    static String hex(byte[] addr) {
        boolean little = ByteOrder.nativeOrder() == ByteOrder.LITTLE_ENDIAN;
        StringBuilder sb = new StringBuilder();
        for (int w = 0; w < addr.length; w += 4) {
            for (int i = 0; i < 4; i++) {
                int b = addr[w + (little ? 3 - i : i)] & 0xff;
                sb.append(Character.toUpperCase(Character.forDigit(b >> 4, 16)))
                        .append(Character.toUpperCase(Character.forDigit(b & 0xf, 16)));
            }
        }
        return sb.toString();
    }
}
