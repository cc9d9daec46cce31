package io.gpusched.server.adversarial;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;

/** A raw HTTP/1.1 client over a loopback socket: sends exactly the bytes given, reads the whole answer. */
final class RawHttp {
    private final InetSocketAddress address;

    RawHttp(InetSocketAddress address) {
        this.address = address;
    }

    /** One answer: status, header block, body (de-chunked when chunked). */
    record Resp(int status, String head, String body) {
        String header(String name) {
            for (String l : head.split("\r\n")) {
                int c = l.indexOf(':');
                if (c > 0 && l.substring(0, c).trim().equalsIgnoreCase(name)) {
                    return l.substring(c + 1).trim();
                }
            }
            return null;
        }

        @Override
        public String toString() {
            return status + " " + body;
        }
    }

    Resp send(byte[] request) throws IOException {
        try (Socket s = new Socket(address.getAddress(), address.getPort())) {
            s.setSoTimeout(20_000);
            OutputStream o = s.getOutputStream();
            try {
                o.write(request);
                o.flush();
            } catch (IOException e) {
                // the server may answer and close before the whole request was written
            }
            ByteArrayOutputStream b = new ByteArrayOutputStream();
            InputStream in = s.getInputStream();
            long deadline = System.nanoTime() + 30_000_000_000L;
            byte[] buf = new byte[8192];
            try {
                int n;
                while ((n = in.read(buf)) >= 0) {
                    b.write(buf, 0, n);
                    if (System.nanoTime() > deadline) {
                        throw new IOException("answer not ended after 30 s: " + b.toString(StandardCharsets.UTF_8)
                                .substring(0, Math.min(b.size(), 300)));
                    }
                }
            } catch (IOException e) {
                if (b.size() == 0) {
                    throw e;
                }
            }
            String all = b.toString(StandardCharsets.UTF_8);
            int end = all.indexOf("\r\n\r\n");
            if (end < 12) {
                throw new IOException("not an HTTP answer: [" + all + "]");
            }
            String head = all.substring(0, end);
            String body = all.substring(end + 4);
            Resp r = new Resp(Integer.parseInt(all.substring(9, 12)), head, body);
            if ("chunked".equalsIgnoreCase(r.header("Transfer-Encoding"))) {
                body = dechunk(body);
            }
            return new Resp(r.status(), head, body);
        }
    }

    private static String dechunk(String s) {
        StringBuilder out = new StringBuilder();
        int i = 0;
        while (i < s.length()) {
            int eol = s.indexOf("\r\n", i);
            if (eol < 0) {
                break;
            }
            int n = Integer.parseInt(s.substring(i, eol).trim(), 16);
            if (n == 0) {
                break;
            }
            // sizes are bytes; the bodies here are ASCII JSON, so chars = bytes
            out.append(s, eol + 2, Math.min(s.length(), eol + 2 + n));
            i = eol + 2 + n + 2;
        }
        return out.toString();
    }

    /** A request with Host 127.0.0.1, Connection: close, the extra headers and, when body != null, a JSON body. */
    Resp req(String method, String path, String body, String... headers) throws IOException {
        return reqHost(method, path, "127.0.0.1:" + address.getPort(), body, headers);
    }

    Resp reqHost(String method, String path, String host, String body, String... headers) throws IOException {
        byte[] b = body == null ? new byte[0] : body.getBytes(StandardCharsets.UTF_8);
        StringBuilder sb = new StringBuilder(method + " " + path + " HTTP/1.1\r\n");
        if (host != null) {
            sb.append("Host: ").append(host).append("\r\n");
        }
        sb.append("Connection: close\r\n");
        boolean typed = false;
        for (String h : headers) {
            sb.append(h).append("\r\n");
            typed |= h.regionMatches(true, 0, "Content-Type:", 0, 13);
        }
        if (body != null) {
            if (!typed) {
                sb.append("Content-Type: application/json\r\n");
            }
            sb.append("Content-Length: ").append(b.length).append("\r\n");
        }
        sb.append("\r\n");
        ByteArrayOutputStream all = new ByteArrayOutputStream();
        all.writeBytes(sb.toString().getBytes(StandardCharsets.ISO_8859_1));
        all.writeBytes(b);
        return send(all.toByteArray());
    }
}
