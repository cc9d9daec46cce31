package io.gpusched.server.adversarial;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A hostile local client, run as a real user in a JVM of its own (JDK classes only, so it runs from a copy of this one
 * class file): it opens {@code n} connections to the console or the node socket and does one thing on each, then
 * prints a line of counts, {@code READY ok=N refused=N other=N limits=<limits named by the 429s> sample=<an answer>},
 * and holds its connections until
 * its standard input closes (or it is killed).
 *
 * <p>Arguments: {@code MODE TARGET N}; TARGET is {@code unix:/path} or {@code tcp:HOST:PORT}; MODE is one of
 * <ul>
 *   <li>{@code half}: a request whose headers never end;</li>
 *   <li>{@code body}: a POST whose body never ends (headers complete, 10 of 100 bytes sent);</li>
 *   <li>{@code streams}: {@code GET /api/v1/events}, kept open;</li>
 *   <li>{@code idle}: connect and send nothing.</li>
 * </ul>
 * Each connection is read until no new answer has come for a while (1.5 s; 3 s for streams, or as soon as every stream
 * has its answer: each is answered, with a 200 or a refusal): refused when its answer is a 429; {@code ok} when it is a
 * 200 ({@code streams}) or nothing (the others); anything else is {@code other}.
 */
public final class HostileClient {
    private static final Pattern LIMIT = Pattern.compile("\\((max\\w+)\\)");
    private HostileClient() {
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        String target = args[1];
        int n = Integer.parseInt(args[2]);
        List<SocketChannel> held = new ArrayList<>();
        int ok = 0;
        int refused = 0;
        int other = 0;
        String sample = "";
        Set<String> limits = new TreeSet<>();
        String request = switch (mode) {
            case "half" -> "GET /api/v1/node HTTP/1.1\r\nHost: localhost\r\nX-Slow: ";
            case "body" -> "POST /api/v1/allocations HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                    + "Content-Length: 100\r\n\r\n{\"flags\":";
            case "streams" -> "GET /api/v1/events HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\n\r\n";
            case "idle" -> "";
            default -> throw new IllegalArgumentException("mode " + mode);
        };
        for (int i = 0; i < n; i++) {
            SocketChannel ch;
            try {
                ch = open(target);
            } catch (IOException e) {
                other++;
                if (sample.isEmpty()) {
                    sample = "connect: " + e;
                }
                continue;
            }
            held.add(ch);
            if (!request.isEmpty()) {
                ch.write(ByteBuffer.wrap(request.getBytes(StandardCharsets.US_ASCII)));
            }
        }
        // answers: read every connection until no new answer has come for a while (1.5 s; 3 s for streams, or until
        // every stream has its answer)
        String[] heads = new String[held.size()];
        Arrays.fill(heads, "");
        long quiet = mode.equals("streams") ? 3000 : 1500;
        long lastNews = System.nanoTime();
        long cap = System.nanoTime() + 60_000_000_000L;
        while (System.nanoTime() - lastNews < quiet * 1_000_000L && System.nanoTime() < cap) {
            boolean waiting = false;
            for (int i = 0; i < held.size(); i++) {
                if (!whole(heads[i])) {
                    String more = available(held.get(i));
                    if (!more.isEmpty()) {
                        heads[i] += more;
                        lastNews = System.nanoTime();
                    }
                    waiting |= !whole(heads[i]);
                }
            }
            if (!waiting && mode.equals("streams")) {
                break; // every stream has its answer's head (a 200 or a refusal): no answer is still to come
            }
            Thread.sleep(50);
        }
        for (int i = 0; i < heads.length; i++) {
            String head = heads[i];
            if (head.startsWith("HTTP/1.1 429")) {
                refused++;
                Matcher m = LIMIT.matcher(head);
                while (m.find()) {
                    limits.add(m.group(1));
                }
                if (!sample.contains("429")) {
                    sample = head.replace("\r\n", " | ");
                }
            } else if (head.isEmpty() && !mode.equals("streams") || head.startsWith("HTTP/1.1 200")) {
                ok++;
            } else {
                other++;
                if (sample.isEmpty()) {
                    sample = head.replace("\r\n", " | ");
                }
            }
        }
        System.out.println("READY ok=" + ok + " refused=" + refused + " other=" + other + " limits="
                + String.join(",", limits) + " sample=" + sample);
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        while (in.readLine() != null) {
            // hold until the test closes our input
        }
        for (SocketChannel ch : held) {
            ch.close();
        }
    }

    /** @return whether {@code head} holds an answer's status line and its headers (or 400 bytes of them) */
    private static boolean whole(String head) {
        return head.length() >= 12 && (head.length() >= 400 || head.contains("\r\n\r\n"));
    }

    private static SocketChannel open(String target) throws IOException {
        SocketAddress a;
        SocketChannel ch;
        if (target.startsWith("unix:")) {
            a = UnixDomainSocketAddress.of(target.substring(5));
            ch = SocketChannel.open(StandardProtocolFamily.UNIX);
        } else {
            String hp = target.substring(4);
            int c = hp.lastIndexOf(':');
            a = new InetSocketAddress(hp.substring(0, c), Integer.parseInt(hp.substring(c + 1)));
            ch = SocketChannel.open();
        }
        ch.connect(a);
        return ch;
    }

    /** @return what has arrived (up to 600 bytes), or "" when nothing has */
    private static String available(SocketChannel ch) throws IOException {
        ch.configureBlocking(false);
        ByteBuffer b = ByteBuffer.allocate(2000);
        try {
            ch.read(b);
        } catch (IOException reset) {
            // closed with a reset after its answer: what arrived counts
        }
        ch.configureBlocking(true);
        return new String(b.array(), 0, b.position(), StandardCharsets.UTF_8);
    }
}
