package io.gpusched.client;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * An HTTP/1.1 answer read from a {@link ByteSource}, within limits: the status line and headers (at most
 * {@link #MAX_HEAD_BYTES}), then the body as the headers frame it ({@code Content-Length}, {@code chunked}, or up to
 * the end of the connection, which the client always asks to close). The body is read whole ({@link #body(long)}) or a
 * line at a time ({@link #line(int)}) for streams. Anything else is a {@link NodeServiceException}: {@code BAD_ANSWER}
 * for what is not HTTP/1.x, {@code ANSWER_TOO_LARGE} past a limit, {@code CONNECTION_LOST} when the stream ends early.
 */
final class Answer {
    /** The most the status line and headers may take. */
    static final int MAX_HEAD_BYTES = 64 * 1024;
    /** The most headers an answer may have. */
    static final int MAX_HEADERS = 100;
    /** The most interim (1xx) answers skipped before the real one. */
    private static final int MAX_INTERIM = 10;

    private final ByteSource in;
    private final Path socket;
    private final byte[] buf = new byte[8192];
    private int pos;
    private int end;
    private int status;
    private final Map<String, String> headers = new LinkedHashMap<>();
    /** Framing of the body: -1 to the end of the stream; -2 chunked; else the bytes left. */
    private long remaining;
    private long chunkLeft;
    private boolean bodyDone;

    private Answer(ByteSource in, Path socket) {
        this.in = in;
        this.socket = socket;
    }

    /**
     * Reads the status line and headers.
     *
     * @param in     the answer's bytes
     * @param socket the service's socket (for messages)
     * @return the answer, positioned at its body
     * @throws NodeServiceException when the head is not HTTP/1.x, too large or cut short
     */
    static Answer read(ByteSource in, Path socket) throws IOException {
        Answer a = new Answer(in, socket);
        a.readHead();
        return a;
    }

    private void readHead() throws IOException {
        int budget = MAX_HEAD_BYTES;
        for (int interim = 0;; interim++) {
            String statusLine = headLine(budget);
            budget -= statusLine.length() + 2;
            if (!statusLine.startsWith("HTTP/1.") || statusLine.length() < 12 || statusLine.charAt(8) != ' '
                    || !Character.isDigit(statusLine.charAt(7)) || !digits(statusLine, 9, 12)
                    || statusLine.length() > 12 && statusLine.charAt(12) != ' ') {
                throw bad("its answer does not begin with an HTTP/1.x status line: " + show(statusLine));
            }
            status = Integer.parseInt(statusLine.substring(9, 12));
            headers.clear();
            while (true) {
                String line = headLine(budget);
                budget -= line.length() + 2;
                if (line.isEmpty()) {
                    break;
                }
                int colon = line.indexOf(':');
                if (colon <= 0 || !token(line.substring(0, colon))) {
                    throw bad("its answer has a malformed header line: " + show(line));
                }
                if (headers.size() >= MAX_HEADERS) {
                    throw tooLarge("its answer has more than " + MAX_HEADERS + " headers");
                }
                String name = line.substring(0, colon).toLowerCase(Locale.ROOT);
                String value = line.substring(colon + 1).strip();
                String before = headers.putIfAbsent(name, value);
                if (before != null) {
                    if (name.equals("content-length") && !before.equals(value)) {
                        throw bad("its answer has two different Content-Length headers");
                    }
                    headers.put(name, before + ", " + value);
                }
            }
            if (status >= 200 || status == 101) {
                break;
            }
            if (interim >= MAX_INTERIM) {
                throw bad("its answer has more than " + MAX_INTERIM + " interim (1xx) answers");
            }
        }
        if (status == 101) {
            throw bad("it switched protocols (101), which the node service's client does not speak");
        }
        String te = headers.get("transfer-encoding");
        String cl = headers.get("content-length");
        if (te != null) {
            String last = te.substring(te.lastIndexOf(',') + 1).strip().toLowerCase(Locale.ROOT);
            if (!last.equals("chunked")) {
                throw bad("its answer has a Transfer-Encoding the client does not read: " + show(te));
            }
            remaining = -2;
        } else if (cl != null) {
            if (!digits(cl, 0, cl.length()) || cl.isEmpty() || cl.length() > 18) {
                throw bad("its answer has an invalid Content-Length: " + show(cl));
            }
            remaining = Long.parseLong(cl);
        } else {
            remaining = status == 204 || status == 304 ? 0 : -1;
        }
        bodyDone = remaining == 0;
    }

    /** @return the HTTP status */
    int status() {
        return status;
    }

    /** @return the value of a header (lower-case name), or null */
    String header(String name) {
        return headers.get(name);
    }

    /** @return whether the answer's media type is {@code type} (parameters ignored) */
    boolean isType(String type) {
        String ct = headers.get("content-type");
        if (ct == null) {
            return false;
        }
        int semi = ct.indexOf(';');
        return (semi < 0 ? ct : ct.substring(0, semi)).strip().equalsIgnoreCase(type);
    }

    /**
     * @param max the most bytes the body may have
     * @return the whole body
     * @throws NodeServiceException ({@code ANSWER_TOO_LARGE}) past {@code max}
     */
    byte[] body(long max) throws IOException {
        if (remaining >= 0 && remaining > max) {
            throw tooLarge("its answer of " + remaining + " bytes is over the client's limit of " + max + " bytes");
        }
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        byte[] b = new byte[8192];
        int n;
        while ((n = readBody(b, 0, b.length)) > 0) {
            out.write(b, 0, n);
            if (out.size() > max) {
                throw tooLarge("its answer is over the client's limit of " + max + " bytes");
            }
        }
        return out.toByteArray();
    }

    /**
     * Reads one line of a streamed body ({@code \n}-terminated; a {@code \r} before it is dropped).
     *
     * @param max the most bytes a line may have
     * @return the line, or null at the end of the body (a last line without {@code \n} is returned as is)
     */
    String line(int max) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        byte[] one = new byte[1];
        while (true) {
            int n = readBody(one, 0, 1);
            if (n <= 0) {
                return out.size() == 0 ? null : out.toString(StandardCharsets.UTF_8);
            }
            if (one[0] == '\n') {
                byte[] l = out.toByteArray();
                int len = l.length > 0 && l[l.length - 1] == '\r' ? l.length - 1 : l.length;
                return new String(l, 0, len, StandardCharsets.UTF_8);
            }
            out.write(one[0]);
            if (out.size() > max) {
                throw tooLarge("a line of its streamed answer is over the client's limit of " + max + " bytes");
            }
        }
    }

    /**
     * Reads body bytes as the headers frame them.
     *
     * @return bytes read, or -1 at the end of the body
     * @throws NodeServiceException ({@code CONNECTION_LOST}) when the connection ends before the framed end
     */
    int readBody(byte[] b, int off, int len) throws IOException {
        if (bodyDone) {
            return -1;
        }
        if (remaining == -1) {
            int n = raw(b, off, len);
            if (n < 0) {
                bodyDone = true;
            }
            return n;
        }
        if (remaining >= 0) {
            int n = raw(b, off, (int) Math.min(len, remaining));
            if (n < 0) {
                throw lost("its answer ended " + remaining + " bytes before its Content-Length");
            }
            remaining -= n;
            bodyDone = remaining == 0;
            return n;
        }
        // chunked
        if (chunkLeft == 0) {
            String size = chunkLine();
            int semi = size.indexOf(';');
            String hex = (semi < 0 ? size : size.substring(0, semi)).strip();
            if (hex.isEmpty() || hex.length() > 15 || !hex.chars().allMatch(c -> Character.digit(c, 16) >= 0)) {
                throw bad("its chunked answer has an invalid chunk size: " + show(size));
            }
            chunkLeft = Long.parseLong(hex, 16);
            if (chunkLeft == 0) {
                int trailers = 0;
                while (!chunkLine().isEmpty()) {
                    if (++trailers > MAX_HEADERS) {
                        throw tooLarge("its chunked answer has more than " + MAX_HEADERS + " trailers");
                    }
                }
                bodyDone = true;
                return -1;
            }
        }
        int n = raw(b, off, (int) Math.min(len, chunkLeft));
        if (n < 0) {
            throw lost("its chunked answer ended in the middle of a chunk");
        }
        chunkLeft -= n;
        if (chunkLeft == 0) {
            if (!chunkLine().isEmpty()) {
                throw bad("its chunked answer has a chunk longer than its size");
            }
        }
        return n;
    }

    private String chunkLine() throws IOException {
        String l = line0(1024, true);
        if (l == null) {
            throw lost("its chunked answer ended before its last chunk");
        }
        return l;
    }

    private String headLine(int budget) throws IOException {
        String l = line0(Math.max(0, budget), false);
        if (l == null) {
            throw lost(status == 0 && pos == 0 && end == 0 ? "it closed the connection without answering"
                    : "its answer ended in the middle of its headers");
        }
        return l;
    }

    /** Reads a CRLF (or LF) line of raw bytes, at most {@code max} long, as ISO-8859-1; null at the end. */
    private String line0(int max, boolean chunk) throws IOException {
        StringBuilder sb = new StringBuilder();
        while (true) {
            if (pos == end && fill() < 0) {
                if (sb.length() == 0) {
                    return null;
                }
                throw lost(chunk ? "its chunked answer ended before its last chunk"
                        : "its answer ended in the middle of its headers");
            }
            byte c = buf[pos++];
            if (c == '\n') {
                int len = sb.length();
                if (len > 0 && sb.charAt(len - 1) == '\r') {
                    sb.setLength(len - 1);
                }
                return sb.toString();
            }
            sb.append((char) (c & 0xff));
            if (sb.length() > max) {
                throw tooLarge(chunk ? "its chunked answer has a chunk header over " + max + " bytes"
                        : "its answer's headers are over the client's limit of " + MAX_HEAD_BYTES + " bytes");
            }
        }
    }

    private int raw(byte[] b, int off, int len) throws IOException {
        if (len == 0) {
            return 0;
        }
        if (pos == end && fill() < 0) {
            return -1;
        }
        int n = Math.min(len, end - pos);
        System.arraycopy(buf, pos, b, off, n);
        pos += n;
        return n;
    }

    private int fill() throws IOException {
        int n = in.read(buf, 0, buf.length);
        if (n < 0) {
            pos = 0;
            end = 0;
            return -1;
        }
        pos = 0;
        end = n;
        return n;
    }

    private static boolean digits(String s, int from, int to) {
        if (to > s.length()) {
            return false;
        }
        for (int i = from; i < to; i++) {
            char c = s.charAt(i);
            if (c < '0' || c > '9') {
                return false;
            }
        }
        return true;
    }

    private static boolean token(String s) {
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c <= ' ' || c >= 127 || "()<>@,;:\\\"/[]?={}".indexOf(c) >= 0) {
                return false;
            }
        }
        return true;
    }

    /** @return at most 120 characters of {@code s}, control characters escaped */
    static String show(String s) {
        String t = s.length() > 120 ? s.substring(0, 120) + "..." : s;
        StringBuilder b = new StringBuilder("\"");
        for (int i = 0; i < t.length(); i++) {
            char c = t.charAt(i);
            if (c < 0x20 || c == 0x7f || c >= 0x80 && c < 0xa0) {
                b.append(String.format(Locale.ROOT, "\\x%02x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }

    private NodeServiceException bad(String what) {
        return new NodeServiceException(NodeServiceException.Kind.BAD_ANSWER, socket, status, "BAD_ANSWER",
                "the node service on " + socket + " answered something else than the service's protocol: " + what
                        + " (is another program listening on this socket?)",
                null);
    }

    private NodeServiceException tooLarge(String what) {
        return new NodeServiceException(NodeServiceException.Kind.ANSWER_TOO_LARGE, socket, status,
                "ANSWER_TOO_LARGE", "the node service on " + socket + " answered too much: " + what, null);
    }

    private NodeServiceException lost(String what) {
        return new NodeServiceException(NodeServiceException.Kind.CONNECTION_LOST, socket, status,
                "CONNECTION_LOST", "the node service on " + socket + " stopped answering: " + what
                        + " (the service stopped, or was killed)",
                null);
    }

    /** @return the names of the headers read, lower case (for tests) */
    List<String> headerNames() {
        return new ArrayList<>(headers.keySet());
    }
}
