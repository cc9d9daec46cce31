package io.gpusched.server.adversarial;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.server.ApiToken;
import io.gpusched.server.ConsoleServer;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Hostile clients against the console, over raw loopback sockets; state checked through the scheduler itself. */
@Tag("adversarial")
class ConsoleAttackTest {
    @TempDir
    Path state;
    SimulatedGpuInventory inventory;
    GpuScheduler scheduler;
    ConsoleServer server;
    String token;

    @BeforeEach
    void start() {
        inventory = GpuInventories.simulated("pcie-4xa10");
        scheduler = GpuScheduler.builder().inventory(inventory).auditLogging(false).build();
        startServer(b -> b);
    }

    /** (re)starts the console on the same scheduler, with {@code options} applied to its builder */
    void startServer(UnaryOperator<ConsoleServer.Builder> options) {
        if (server != null) {
            server.close();
        }
        server = options.apply(ConsoleServer.builder().scheduler(scheduler).inventory(inventory).stateDir(state)
                .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0))).build().start();
        token = server.token().value();
    }

    @AfterEach
    void stop() {
        server.close();
        scheduler.close();
        inventory.close();
    }

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
    }

    /** sends raw bytes, reads the whole answer (Connection: close) */
    Resp raw(byte[] request) throws IOException {
        try (Socket s = new Socket(server.address().getAddress(), server.address().getPort())) {
            s.setSoTimeout(20_000);
            OutputStream o = s.getOutputStream();
            try {
                o.write(request);
                o.flush();
            } catch (IOException e) {
                // the server may close early on an oversize body; read what it answered
            }
            ByteArrayOutputStream b = new ByteArrayOutputStream();
            InputStream in = s.getInputStream();
            try {
                in.transferTo(b);
            } catch (IOException e) {
                if (b.size() == 0) {
                    throw e;
                }
            }
            String all = b.toString(StandardCharsets.UTF_8);
            int end = all.indexOf("\r\n\r\n");
            assertThat(end).as("an HTTP answer, got: %s", all).isPositive();
            return new Resp(Integer.parseInt(all.substring(9, 12)), all.substring(0, end), all.substring(end + 4));
        }
    }

    Resp req(String method, String path, String body, String... headers) throws IOException {
        byte[] b = body == null ? new byte[0] : body.getBytes(StandardCharsets.UTF_8);
        StringBuilder sb =
                new StringBuilder(method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
        for (String h : headers) {
            sb.append(h).append("\r\n");
        }
        if (body != null) {
            sb.append("Content-Type: application/json\r\nContent-Length: ").append(b.length).append("\r\n");
        }
        sb.append("\r\n");
        ByteArrayOutputStream all = new ByteArrayOutputStream();
        all.writeBytes(sb.toString().getBytes(StandardCharsets.ISO_8859_1));
        all.writeBytes(b);
        return raw(all.toByteArray());
    }

    String auth() {
        return "Authorization: Bearer " + token;
    }

    @Test
    void noChangeWithoutTheExactToken() throws Exception {
        String body = "{\"flags\": [\"--gpu=1\"]}";
        List<String[]> bad = List.of(new String[0], new String[]{"Authorization: Bearer "},
                new String[]{"Authorization: Bearer"}, new String[]{"Authorization: Bearer " + token + "x"},
                new String[]{"Authorization: Bearer " + token.substring(0, token.length() - 1)},
                new String[]{"Authorization: Basic " + token}, new String[]{"Authorization: " + token},
                new String[]{"Authorization: Bearer  " + token + " extra"},
                new String[]{"Cookie: token=" + token}, new String[]{"X-Auth-Token: " + token},
                new String[]{"Origin: http://evil.example", "Cookie: session=" + token});
        for (String[] h : bad) {
            Resp r = req("POST", "/api/v1/allocations", body, h);
            assertThat(r.status()).as("POST with %s", List.of(h)).isEqualTo(401);
        }
        for (String q : List.of("?token=", "?access_token=", "?auth=Bearer%20")) {
            assertThat(req("POST", "/api/v1/allocations" + q + token, body).status()).as(q).isEqualTo(401);
        }
        assertThat(scheduler.allocations()).isEmpty();
        // the right token works, then a delete without it is refused and the allocation stays
        Resp ok = req("POST", "/api/v1/allocations", body, auth());
        assertThat(ok.status()).as(ok.body()).isBetween(200, 201);
        String id = scheduler.allocations().get(0).id();
        assertThat(req("DELETE", "/api/v1/allocations/" + id, null).status()).isEqualTo(401);
        assertThat(req("DELETE", "/api/v1/allocations/" + id, null, "Authorization: Bearer x" + token).status())
                .isEqualTo(401);
        assertThat(scheduler.allocations()).hasSize(1);
        // unknown and odd ids with the token: 404, nothing else released
        for (String unknown : List.of("nope", "..%2F..%2Fetc", "%00", id + "x", "%2e%2e")) {
            Resp r = req("DELETE", "/api/v1/allocations/" + unknown, null, auth());
            assertThat(r.status()).as("DELETE %s: %s", unknown, r.body()).isBetween(400, 404);
        }
        assertThat(scheduler.allocations()).hasSize(1);
        assertThat(req("DELETE", "/api/v1/allocations/" + id, null, auth()).status()).isBetween(200, 204);
        assertThat(scheduler.allocations()).isEmpty();
    }

    @Test
    void malformedBodiesAre4xxAndChangeNothing() throws Exception {
        List<String> bodies = List.of("", "{", "null", "[]", "\"x\"", "{\"flags\": \"--gpu=1\"}",
                "{\"flags\": [1]}", "{\"flags\": [\"--gpu=1\"], \"flags\": [\"--gpu=99\"]}",
                "{\"flags\": [\"--gpu=99\"]}", "{\"flags\": [\"--gpu=-1\"]}", "{\"flags\": [\"--bogus\"]}",
                "{\"flags\": [\"--gpu=1\u0000\"]}", "{\"flags\": [\"--gpu=99999999999999999999999\"]}",
                "{\"resources\": {\"gpu_count\": 1e400}}", "{\"resources\": {\"gpu_count\": 99999999999999999999}}",
                "{\"resources\": {\"gpu_count\": \"two\"}}", "{\"resources\": {\"gpu_count\": -3}}",
                "{\"resources\": {\"gpu_count\": 1.5}}", "{\"resources\": []}", "{\"flags\": null}",
                "{\"flags\": [\"--gpu=1\"], \"resources\": {\"gpu_count\": 1}}",
                "[".repeat(100_00), "{\"a\":".repeat(3000) + "1" + "}".repeat(3000),
                "{\"flags\": [\"--gpu=1\"]} trailing", "{\"flags\": [\"--gpu=1\"]}{}");
        for (String b : bodies) {
            Resp r = req("POST", "/api/v1/allocations", b, auth());
            String shown = b.length() > 60 ? b.substring(0, 60) + "..." : b;
            assertThat(r.status()).as("body %s -> %s", shown, r.body()).isBetween(400, 499);
            assertThat(r.body()).as("body %s", shown).isNotBlank();
            assertThat(scheduler.allocations()).as("body %s", shown).isEmpty();
        }
    }

    @Test
    void oversizeAndChunkedBodiesAreRefused() throws Exception {
        String big = "{\"flags\": [\"--gpu=1\"], \"pad\": \"" + "x".repeat(64 * 1024) + "\"}";
        assertThat(req("POST", "/api/v1/allocations", big, auth()).status()).isBetween(400, 499);
        // a length that lies beyond the cap, without sending it all
        Resp lie = raw(("POST /api/v1/allocations HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" + auth()
                + "\r\nContent-Length: 999999999999\r\n\r\n{}").getBytes(StandardCharsets.ISO_8859_1));
        assertThat(lie.status()).isBetween(400, 499);
        // chunked without length, over the cap
        StringBuilder chunked =
                new StringBuilder("POST /api/v1/allocations HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                        + auth() + "\r\nTransfer-Encoding: chunked\r\n\r\n");
        for (int i = 0; i < 40; i++) {
            chunked.append("400\r\n").append("x".repeat(0x400)).append("\r\n");
        }
        chunked.append("0\r\n\r\n");
        assertThat(raw(chunked.toString().getBytes(StandardCharsets.ISO_8859_1)).status()).isBetween(400, 499);
        // a small chunked body is a body like any other
        String small = "{\"flags\": [\"--gpu=1\"]}";
        Resp ok = raw(("POST /api/v1/allocations HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" + auth()
                + "\r\nTransfer-Encoding: chunked\r\n\r\n" + Integer.toHexString(small.length()) + "\r\n" + small
                + "\r\n0\r\n\r\n").getBytes(StandardCharsets.ISO_8859_1));
        assertThat(ok.status()).as(ok.body()).isBetween(200, 201);
        // oversize header: beyond the JDK server's own bound (380 KiB on JDK 17.0.15; the console no longer sets the
        // JVM-wide property), so a 4xx or a closed connection, never a 200
        try {
            Resp hdr = req("GET", "/api/v1/node", null, "X-Big: " + "y".repeat(500_000));
            assertThat(hdr.status()).isBetween(400, 499);
        } catch (IOException closed) {
            // the connection is closed without an answer: nothing is served either
        }
        assertThat(req("GET", "/api/v1/node", null).status()).isEqualTo(200);
    }

    @Test
    void pathTraversalServesNothingOutsideTheAssets() throws Exception {
        Files.writeString(state.resolve("secret.txt"), "TOPSECRET");
        for (String p : List.of("/../../../../etc/passwd", "/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
                "/api/v1/../../../../etc/passwd", "/static/../../../../etc/passwd",
                "/static/%2e%2e%2f%2e%2e%2fetc/passwd",
                "/assets/..%2f..%2f..%2f..%2fetc%2fpasswd", "/..%5c..%5c..%5cetc/passwd", "/%252e%252e/etc/passwd",
                "/console.token", "/" + ApiToken.FILE_NAME, "/../" + ApiToken.FILE_NAME, "/secret.txt",
                "/static/" + state.resolve("secret.txt"), "/index.html/../../etc/passwd", "//etc/passwd",
                "/app.js%00.html", "/io/gpusched/server/ConsoleServer.class", "/META-INF/MANIFEST.MF")) {
            Resp r = req("GET", p, null);
            assertThat(r.body()).as(p).doesNotContain("root:x:0").doesNotContain("TOPSECRET")
                    .doesNotContain(token).doesNotContain("Manifest-Version");
            assertThat(r.status()).as(p).isNotEqualTo(500);
        }
    }

    @Test
    void crossOriginPagesGetNoCredentialedCorsAndCannotChangeState() throws Exception {
        for (String m : List.of("OPTIONS", "GET", "POST")) {
            Resp r = req(m, "/api/v1/allocations", m.equals("POST") ? "{\"flags\": [\"--gpu=1\"]}" : null,
                    "Origin: http://evil.example", "Access-Control-Request-Method: POST",
                    "Access-Control-Request-Headers: authorization");
            String acao = r.header("Access-Control-Allow-Origin");
            String acac = r.header("Access-Control-Allow-Credentials");
            assertThat(acao == null || !(acao.equals("*") && "true".equalsIgnoreCase(acac))).as(m + r.head()).isTrue();
            assertThat(acao == null || !acao.equals("http://evil.example")).as(m + r.head()).isTrue();
            assertThat(r.header("Set-Cookie")).as(m).isNull();
        }
        // text/plain form POST (no preflight) from another origin: no token, so no change
        assertThat(
                raw(("POST /api/v1/allocations HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nOrigin: http://evil"
                        + "\r\nContent-Type: text/plain\r\nContent-Length: 22\r\n\r\n{\"flags\": [\"--gpu=1\"]}")
                        .getBytes(StandardCharsets.ISO_8859_1)).status())
                .isEqualTo(401);
        assertThat(scheduler.allocations()).isEmpty();
    }

    @Test
    void htmlInOwnerJobAndLabelsIsEscapedInEveryAnswer() throws Exception {
        String evil = "<script>alert(1)</script>";
        Resp ok =
                req("POST", "/api/v1/allocations", "{\"flags\": [\"--gpu=1\", \"--owner=" + "<script>alert(1)</script>"
                        + "\", \"--job=<img src=x onerror=alert(2)>\", \"--label=k=</script><b>\"]}", auth());
        assertThat(ok.status()).as(ok.body()).isBetween(200, 201);
        // JSON carries the text as data, typed so that no browser sniffs it as HTML
        for (String p : List.of("/api/v1/allocations", "/api/v1/audit")) {
            Resp r = req("GET", p, null);
            assertThat(r.header("Content-Type")).as(p).startsWith("application/json");
            assertThat(r.header("X-Content-Type-Options")).as(p + " nosniff").isEqualToIgnoringCase("nosniff");
        }
        Resp page = req("GET", "/", null);
        assertThat(page.body()).doesNotContain(evil).doesNotContain("<img src=x");
        // the page renders data as text only: no HTML sinks in the served script
        Resp js = req("GET", "/app.js", null);
        assertThat(js.status()).isEqualTo(200);
        assertThat(js.body()).contains("textContent").doesNotContain("innerHTML").doesNotContain("outerHTML")
                .doesNotContain("insertAdjacentHTML").doesNotContain("document.write").doesNotContain("eval(");
    }

    @Test
    void neverFinishedBodiesDoNotStarveOthers() throws Exception {
        // the shortest idle timeout (the server's time limit for a silent connection, default 10 s): the stalled
        // bodies are cut after it
        startServer(b -> b.idleTimeout(Duration.ofSeconds(1)));
        List<Socket> slow = new ArrayList<>();
        try {
            for (int i = 0; i < 40; i++) { // more than the default 16 workers
                Socket s = new Socket(server.address().getAddress(), server.address().getPort());
                s.getOutputStream().write(("POST /api/v1/allocations HTTP/1.1\r\nHost: 127.0.0.1\r\n" + auth()
                        + "\r\nContent-Length: 100\r\n\r\n{\"fl").getBytes(StandardCharsets.ISO_8859_1));
                s.getOutputStream().flush();
                slow.add(s);
            }
            // a normal client is still served (the stalled ones are cut after the server's request time limit)
            try (Socket s = new Socket(server.address().getAddress(), server.address().getPort())) {
                s.setSoTimeout(45_000);
                s.getOutputStream().write("GET /api/v1/node HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
                        .getBytes(StandardCharsets.ISO_8859_1));
                assertThat(new String(s.getInputStream().readAllBytes(), StandardCharsets.UTF_8))
                        .startsWith("HTTP/1.1 200");
            }
            // and the stalled connections are eventually closed by the server (read -1 or reset, not a timeout)
            Socket first = slow.get(0);
            first.setSoTimeout(60_000);
            try {
                InputStream in = first.getInputStream();
                while (in.read() >= 0) {
                    // drain any 408
                }
            } catch (SocketTimeoutException e) {
                throw new AssertionError("a never-finished body held its connection for 60 s", e);
            } catch (IOException reset) {
                // closed by the server
            }
        } finally {
            for (Socket s : slow) {
                s.close();
            }
        }
    }

    @Test
    void listenBeyondLoopbackNeedsAllowRemoteAndIpv6LoopbackWorks() throws Exception {
        assertThatThrownBy(() -> ConsoleServer.builder().scheduler(scheduler).inventory(inventory).stateDir(state)
                .listen(new InetSocketAddress("0.0.0.0", 0)).build().start())
                .isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> ConsoleServer.builder().scheduler(scheduler).inventory(inventory).stateDir(state)
                .listen(new InetSocketAddress("::", 0)).build().start()).isInstanceOf(IllegalArgumentException.class);
        InetAddress v6;
        try {
            v6 = InetAddress.getByName("::1");
            new java.net.ServerSocket(0, 1, v6).close();
        } catch (IOException e) {
            org.junit.jupiter.api.Assumptions.abort("no IPv6 loopback here: " + e);
            return;
        }
        try (ConsoleServer s6 = ConsoleServer.builder().scheduler(scheduler).inventory(inventory).stateDir(state)
                .listen(new InetSocketAddress(v6, 0)).build().start()) {
            try (Socket s = new Socket(v6, s6.address().getPort())) {
                s.setSoTimeout(20_000);
                s.getOutputStream().write("GET /api/v1/node HTTP/1.1\r\nHost: [::1]\r\nConnection: close\r\n\r\n"
                        .getBytes(StandardCharsets.ISO_8859_1));
                String a = new String(s.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
                assertThat(a).startsWith("HTTP/1.1 200");
            }
            assertThat(s6.url()).startsWith("http://[");
        }
    }
}
