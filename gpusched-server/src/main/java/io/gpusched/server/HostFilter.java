package io.gpusched.server;

import com.sun.net.httpserver.Filter;
import com.sun.net.httpserver.HttpExchange;
import java.io.IOException;
import java.net.InetAddress;
import java.util.List;
import java.util.Locale;

/**
 * The Host rule against DNS rebinding (a page whose name is re-pointed at this host makes a local browser a loopback
 * client, but its requests still name the page's host). Accepted, with any port or none: loopback names
 * ({@code localhost}, IPv4 literals in 127.0.0.0/8, {@code [::1]}) and the names given to
 * {@link ConsoleServer.Builder#allowedHosts}; when listening beyond loopback ({@link
 * ConsoleServer.Builder#allowRemote}),
 * also any IP literal (a literal cannot be re-pointed) and this host's name. A request without a Host is accepted on
 * HTTP/1.0 only (400 on HTTP/1.1); two Host headers are 400; any other refusal is 421 with a JSON error naming the
 * Host and what is accepted. Requests on the node service's Unix socket pass (no browser page can reach it).
 */
final class HostFilter extends Filter {
    private final boolean remote;
    private final List<String> allowed;
    private final String localName;
    private final int maxBodyBytes;

    /**
     * @param remote       whether the server listens beyond loopback
     * @param allowed      more names the operator accepts (lower case, no port)
     * @param localName    this host's name (accepted when remote)
     * @param maxBodyBytes how much of a refused request's body is drained
     */
    HostFilter(boolean remote, List<String> allowed, String localName, int maxBodyBytes) {
        this.remote = remote;
        this.allowed = List.copyOf(allowed);
        this.localName = localName;
        this.maxBodyBytes = maxBodyBytes;
    }

    @Override
    public void doFilter(HttpExchange ex, Chain chain) throws IOException {
        if (IdentityFilter.unix(ex)) { // no browser reaches the Unix socket: the rule is TCP's
            chain.doFilter(ex);
            return;
        }
        String refused = refusal(ex);
        if (refused != null) {
            Exchanges.drain(ex, maxBodyBytes);
            Exchanges.error(ex, refused.startsWith("HTTP/1.1") ? 400 : 421, refused, null);
            return;
        }
        chain.doFilter(ex);
    }

    @Override
    public String description() {
        return "gpusched console: Host rule (DNS rebinding guard)";
    }

    /** @return why the request is refused, or null when its Host is accepted */
    private String refusal(HttpExchange ex) {
        List<String> hosts = ex.getRequestHeaders().get("Host");
        if (hosts == null || hosts.isEmpty()) {
            return ex.getProtocol().equalsIgnoreCase("HTTP/1.0") ? null
                    : "HTTP/1.1 requests need a Host header (RFC 9112 section 3.2)";
        }
        if (hosts.size() > 1) {
            return "HTTP/1.1 requests carry one Host header; this one has " + hosts.size();
        }
        String host = hosts.get(0);
        return hostAccepted(host, remote, allowed, localName) ? null
                : "Host " + SampleHistory.printable(host) + " is not served here (DNS rebinding guard); accepted: "
                        + acceptedHosts();
    }

    /** @return the accepted Host names, in words, for the refusal */
    private String acceptedHosts() {
        StringBuilder s = new StringBuilder("localhost, 127.0.0.0/8 literals, [::1]");
        if (remote) {
            s.append(", any IP literal, ").append(localName);
        }
        for (String h : allowed) {
            s.append(", ").append(h);
        }
        return s.append(" (any port); add names with --allowed-host").toString();
    }

    /**
     * @param host      a Host header's value ({@code name}, {@code name:port}, {@code [v6]} or {@code [v6]:port})
     * @param remote    whether the server listens beyond loopback
     * @param allowed   more names the operator accepts (lower case, no port)
     * @param localName this host's name (accepted when remote)
     * @return whether the Host is accepted
     */
    static boolean hostAccepted(String host, boolean remote, List<String> allowed, String localName) {
        String name;
        boolean literal6 = false;
        if (host.startsWith("[")) {
            int end = host.indexOf(']');
            if (end < 0 || !portOk(host.substring(end + 1))) {
                return false;
            }
            name = host.substring(1, end);
            literal6 = true;
        } else {
            int colon = host.indexOf(':');
            name = colon < 0 ? host : host.substring(0, colon);
            if (colon >= 0 && !portOk(host.substring(colon))) {
                return false;
            }
        }
        name = name.toLowerCase(Locale.ROOT);
        if (name.isEmpty() || !name.chars().allMatch(c -> c > 0x20 && c < 0x7f)) {
            return false;
        }
        if (literal6) {
            byte[] a = ipv6(name);
            return a != null && (remote || isLoopback6(a));
        }
        int[] v4 = ipv4(name);
        if (v4 != null) {
            return remote || v4[0] == 127;
        }
        if (name.equals("localhost") || allowed.contains(name)) {
            return true;
        }
        return remote && name.equals(localName.toLowerCase(Locale.ROOT));
    }

    private static boolean portOk(String rest) {
        return rest.isEmpty() || rest.length() >= 2 && rest.length() <= 6 && rest.charAt(0) == ':'
                && rest.substring(1).chars().allMatch(c -> c >= '0' && c <= '9');
    }

    /** @return the four octets of a dotted-quad IPv4 literal (ASCII digits, each 0-255), or null */
    private static int[] ipv4(String s) {
        String[] parts = s.split("\\.", -1);
        if (parts.length != 4) {
            return null;
        }
        int[] out = new int[4];
        for (int i = 0; i < 4; i++) {
            String p = parts[i];
            if (p.isEmpty() || p.length() > 3 || !p.chars().allMatch(c -> c >= '0' && c <= '9')) {
                return null;
            }
            out[i] = Integer.parseInt(p);
            if (out[i] > 255) {
                return null;
            }
        }
        return out;
    }

    /** @return the 16 bytes of an IPv6 literal (hex digits, colons, optional dotted tail; no zone), or null */
    private static byte[] ipv6(String s) {
        if (s.isEmpty() || s.indexOf(':') < 0 || !s.chars().allMatch(c -> c == ':' || c == '.'
                || c >= '0' && c <= '9' || c >= 'a' && c <= 'f')) {
            return null;
        }
        try { // only hex, colons and dots reach here, so this never resolves a name
            InetAddress a = InetAddress.getByName("[" + s + "]");
            byte[] raw = a.getAddress();
            return raw.length == 16 ? raw : null;
        } catch (IOException e) {
            return null;
        }
    }

    private static boolean isLoopback6(byte[] a) {
        for (int i = 0; i < 15; i++) {
            if (a[i] != 0) {
                return false;
            }
        }
        return a[15] == 1;
    }
}
