package io.gpusched.server.adversarial;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.server.ConsoleServer;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Hostile HTTP against a console over a real node ledger, through raw loopback sockets; state checked through the
 * scheduler (never through the console's own answers) and /metrics read with a parser written for this review.
 */
@Tag("adversarial")
class ConsoleHttpAttackTest {
    @TempDir
    Path tmp;
    SimulatedGpuInventory inventory;
    GpuScheduler scheduler;
    ConsoleServer server;
    RawHttp http;
    String token;
    int port;

    @BeforeEach
    void start() throws IOException {
        Path ledger = Files.createDirectory(tmp.resolve("ledger"));
        Files.createDirectory(tmp.resolve("console"));
        inventory = GpuInventories.simulated("pcie-4xa10");
        scheduler = GpuScheduler.builder().inventory(inventory).auditLogging(false).stateDir(ledger).build();
        startServer(b -> b);
    }

    /** (re)starts the console on the same scheduler and state, with {@code options} applied to its builder */
    void startServer(UnaryOperator<ConsoleServer.Builder> options) {
        if (server != null) {
            server.close();
        }
        server = options.apply(ConsoleServer.builder().scheduler(scheduler).inventory(inventory)
                .stateDir(tmp.resolve("console")).sampleInterval(Duration.ofMillis(100))
                .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0))).build().start();
        http = new RawHttp(server.address());
        token = server.token().value();
        port = server.address().getPort();
    }

    @AfterEach
    void stop() {
        server.close();
        scheduler.close();
        inventory.close();
    }

    String auth() {
        return "Authorization: Bearer " + token;
    }

    // ------------------------------------------------------------------------------------------- Host / Origin

    /**
     * DNS rebinding: a page on evil.example whose name is re-pointed at 127.0.0.1 makes the browser a loopback client
     * whose requests carry {@code Host: evil.example}. Reads are open on loopback, so without a Host check the page
     * reads the node's allocations (owners, jobs), audit and doctor report.
     */
    @Test
    void dnsRebindingHostIsRefusedForReads() throws Exception {
        scheduler.allocate(GpuRequests.fromCliFlags("--gpu=1", "--owner=secret-owner"));
        for (String host : List.of("evil.example:" + port, "evil.example", "127.0.0.1.evil.example:" + port,
                "localhost.evil.example")) {
            for (String path : List.of("/api/v1/allocations", "/api/v1/audit", "/api/v1/doctor", "/api/v1/node",
                    "/metrics")) {
                RawHttp.Resp r = http.reqHost("GET", path, host, null);
                assertThat(r.status()).as("GET %s with Host: %s -> %s", path, host, r.status()).isIn(400, 403, 421);
                assertThat(r.body()).doesNotContain("secret-owner");
            }
        }
    }

    @Test
    void loopbackHostNamesAreServed() throws Exception {
        for (String host : List.of("127.0.0.1:" + port, "localhost:" + port, "[::1]:" + port, "LOCALHOST:" + port)) {
            assertThat(http.reqHost("GET", "/api/v1/node", host, null).status()).as(host).isEqualTo(200);
        }
    }

    @Test
    void nonLoopbackHostIsRefusedForChangesEvenWithTheToken() throws Exception {
        RawHttp.Resp r =
                http.reqHost("POST", "/api/v1/allocations", "evil.example:" + port, "{\"flags\": [\"--gpu=1\"]}",
                        auth());
        assertThat(r.status()).as("POST with Host: evil.example -> %s", r).isIn(400, 403, 421);
        assertThat(scheduler.allocations()).isEmpty();
    }

    @Test
    void noCorsGrantsAndPreflightsDoNotOpenChanges() throws Exception {
        List<RawHttp.Resp> all = new ArrayList<>();
        RawHttp.Resp pre = http.req("OPTIONS", "/api/v1/allocations", null, "Origin: http://evil.example",
                "Access-Control-Request-Method: POST", "Access-Control-Request-Headers: authorization");
        assertThat(pre.status()).as("preflight %s", pre).isGreaterThanOrEqualTo(400);
        all.add(pre);
        all.add(http.req("GET", "/api/v1/allocations", null, "Origin: http://evil.example"));
        all.add(http.req("HEAD", "/api/v1/events", null, "Origin: null"));
        all.add(http.req("POST", "/api/v1/allocations", "{\"flags\": [\"--gpu=1\"]}", "Origin: http://evil.example"));
        for (RawHttp.Resp r : all) {
            for (String h : r.head().split("\r\n")) {
                assertThat(h.toLowerCase()).as("answer %s", r.head()).doesNotStartWith("access-control-allow");
                assertThat(h.toLowerCase()).doesNotStartWith("set-cookie");
            }
        }
        assertThat(scheduler.allocations()).isEmpty();
    }

    // ------------------------------------------------------------------------------------------- methods

    @Test
    void methodConfusionNeverReleasesOrAllocates() throws Exception {
        String id = scheduler.allocate(GpuRequests.fromCliFlags("--gpu=1", "--owner=o")).id();
        String path = "/api/v1/allocations/" + id;
        // method override headers and parameters are not methods
        for (String h : List.of("X-HTTP-Method-Override: DELETE", "X-HTTP-Method: DELETE",
                "X-Method-Override: DELETE")) {
            RawHttp.Resp r = http.req("GET", path, null, h);
            assertThat(r.status()).as("GET with %s", h).isEqualTo(200);
            r = http.req("POST", path, "{}", h, auth());
            assertThat(r.status()).as("POST with %s and the token -> %s", h, r).isGreaterThanOrEqualTo(400);
        }
        assertThat(http.req("GET", path + "?_method=DELETE", null).status()).isEqualTo(200);
        // other methods and spellings, with the token: never a release
        for (String m : List.of("delete", "Delete", "PUT", "PATCH", "OPTIONS", "TRACE", "PROPFIND", "CONNECT",
                "DELETE\u00a0")) {
            RawHttp.Resp r;
            try {
                r = http.req(m, path, null, auth());
            } catch (IOException refused) {
                continue; // the JDK refused the request line outright
            }
            assertThat(r.status()).as("%s %s -> %s", m, path, r).isGreaterThanOrEqualTo(400);
            assertThat(r.body()).as("%s must not echo the request", m).doesNotContain(token);
        }
        // without the token, any non-read method is 401 (TRACE would otherwise echo headers)
        for (String m : List.of("TRACE", "OPTIONS", "PUT", "PATCH", "delete")) {
            RawHttp.Resp r = http.req(m, path, null, "X-Probe: secret");
            assertThat(r.status()).as("%s without token", m).isEqualTo(401);
            assertThat(r.body()).doesNotContain("secret");
        }
        // HEAD is a read: headers, no body, nothing released
        RawHttp.Resp head = http.req("HEAD", path, null);
        assertThat(head.status()).isEqualTo(200);
        assertThat(head.body()).isEmpty();
        assertThat(scheduler.allocations()).extracting(a -> a.id()).containsExactly(id);
        // POST to /api/v1/allocations/{id} is no allocate either
        assertThat(http.req("POST", path, "{\"flags\": [\"--gpu=1\"]}", auth()).status()).isEqualTo(405);
        assertThat(scheduler.allocations()).hasSize(1);
    }

    // ------------------------------------------------------------------------------------------- static assets

    @Test
    void pathTraversalNeverServesAFileBeyondThePageAssets() throws Exception {
        List<String> paths = List.of("/../pom.xml", "/..%2fpom.xml", "/%2e%2e/%2e%2e/etc/passwd",
                "/%2e%2e%2f%2e%2e%2fetc%2fpasswd", "/web/app.js", "/io/gpusched/server/web/app.js",
                "/app.js/..%2f..%2fConsoleServer.class", "/ConsoleServer.class",
                "/io/gpusched/server/ConsoleServer.class", "/app.js%00.html", "/%2fetc%2fpasswd", "//etc/passwd",
                "/api/v1/../../etc/passwd", "/app.js;.css", "/APP.JS", "/api/v1/openapi.json/../../../pom.xml",
                "/META-INF/MANIFEST.MF", "/.%2e/.%2e/etc/passwd", "/..\\..\\etc\\passwd", "/%c0%ae%c0%ae/etc/passwd",
                "/web/../web/app.js", "/./app.js/", "/favicon.svg/..", "/api/v1/openapi.json%2f..%2f..%2fapp.js",
                "/api/v1/allocations/..%2f..%2f..%2fetc%2fpasswd", "/index.html/", "/%61pp.js");
        for (String p : paths) {
            RawHttp.Resp r;
            try {
                r = http.req("GET", p, null);
            } catch (IOException refused) {
                continue;
            }
            assertThat(r.status()).as("GET %s -> %s", p, r.status()).isIn(400, 404);
            assertThat(r.body()).as("GET %s", p).doesNotContain("root:x:0").doesNotContain("<project")
                    .doesNotContain("Manifest-Version").doesNotContain("\u00ca\u00fe\u00ba\u00be")
                    .doesNotContain("function ").doesNotContain("<html");
        }
    }

    // ------------------------------------------------------------------------------------------- bodies

    @Test
    void hostileBodiesAre4xxNever500AndChangeNothing() throws Exception {
        StringBuilder deep = new StringBuilder();
        deep.append("[".repeat(6000)).append("]".repeat(6000));
        StringBuilder deepFlags = new StringBuilder("{\"flags\": ").append("[".repeat(4000)).append("]".repeat(4000))
                .append("}");
        StringBuilder deepRes = new StringBuilder("{\"resources\": {\"gpu_count\": 1, \"x\": ")
                .append("{\"a\":".repeat(2000)).append("1").append("}".repeat(2000)).append("}}");
        List<String> bodies = List.of(deep.toString(), deepFlags.toString(), deepRes.toString(),
                "{\"resources\": {\"gpu_count\": 1e400}}", "{\"resources\": {\"gpu_count\": 99999999999999999999999}}",
                "{\"resources\": {\"gpu_count\": -1}}", "{\"resources\": {\"gpu_count\": 1.5}}",
                "{\"resources\": {\"gpu_count\": true}}",
                "{\"resources\": {\"gpu_count\": null, \"gpu_memory\": \"8GB\"}}",
                "{\"resources\": {\"gpu_count\": [1]}}", "{\"resources\": {\"gpu_count\": {\"a\": 1}}}",
                "{\"resources\": {\"gpu_count\": 1, \"gpu_count\": 2}}",
                "{\"resources\": {\"gpu_count\": 1, \"gpu_memory\": \"99999999999999999999TB\"}}",
                "{\"resources\": {\"gpu_count\": 1, \"gpu_memory_mb\": 1e308}}",
                "{\"resources\": {\"gpu_count\": NaN}}", "{\"resources\": {\"gpu_count\": Infinity}}",
                "{\"resources\": {\"gpu_count\": 0x10}}", "{\"resources\": {\"gpu_count\": 01}}",
                "{\"flags\": [\"--gpu=99999999999999999999\"]}", "{\"flags\": [\"--gpu=-1\"]}",
                "{\"flags\": [\"--gpu-memory=1e400GB\"]}", "{\"flags\": [\"--gpu=\\u0000\"]}",
                "{\"flags\": [\"--bogus\"]}", "{\"flags\": null}", "{\"flags\": \"--gpu=1\"}",
                "{\"flags\": [1]}", "{\"flags\": [null]}", "{\"flags\": [[\"--gpu=1\"]]}",
                "{\"flags\": [\"--gpu=1\"], \"flags\": [\"--gpu=2\"]}",
                "{\"flags\": [\"--gpu=1\"], \"resources\": {\"gpu_count\": 1}}",
                "{\"flags\": [\"--gpu=1\"]} {\"flags\": [\"--gpu=1\"]}", "{\"flags\": [\"--gpu=1\"]",
                "{\"flags\": [\"--gpu=1\",]}", "{'flags': ['--gpu=1']}", "{\"flags\": [\"--gpu=1\"]} //",
                "null", "", " ", "\"--gpu=1\"", "[\"--gpu=1\"]", "1", "{}",
                "{\"\": 1}", "flags=--gpu%3D1", "{\"resources\": {}}", "{\"resources\": []}",
                "{\"resources\": {\"gpu_count\": 1, \"gpu_vendor\": \"\\ud800\"}}",
                "{\"flags\": [\"--gpu=1\", \"--gpu-model=" + "(".repeat(3000) + "\"]}");
        List<String> fails = new ArrayList<>();
        for (String body : bodies) {
            RawHttp.Resp r = http.req("POST", "/api/v1/allocations", body, auth());
            String shown = body.length() > 80 ? body.substring(0, 80) + "... (" + body.length() + " chars)" : body;
            if (r.status() < 400 || r.status() >= 500) {
                fails.add(shown + " -> " + r.status() + " " + r.body());
            } else if (!r.body().startsWith("{") || !r.body().contains("\"error\"")) {
                fails.add(shown + " -> no JSON error: " + r.body());
            }
        }
        // invalid UTF-8 inside a string
        ByteArrayOutputStream raw = new ByteArrayOutputStream();
        byte[] head = ("POST /api/v1/allocations HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" + auth()
                + "\r\nContent-Type: application/json\r\nContent-Length: 25\r\n\r\n")
                .getBytes(StandardCharsets.US_ASCII);
        raw.writeBytes(head);
        raw.writeBytes("{\"flags\": [\"--owner=".getBytes(StandardCharsets.US_ASCII));
        raw.writeBytes(new byte[]{(byte) 0xff, (byte) 0xfe, '"', ']'});
        raw.writeBytes("}".getBytes(StandardCharsets.US_ASCII));
        RawHttp.Resp bad = http.send(raw.toByteArray());
        if (bad.status() < 400 || bad.status() >= 500) {
            fails.add("invalid UTF-8 -> " + bad);
        }
        assertThat(fails).as("bodies answered other than 4xx with a JSON error").isEmpty();
        assertThat(scheduler.allocations()).isEmpty();
        // the server still allocates afterwards
        assertThat(http.req("POST", "/api/v1/allocations", "{\"flags\": [\"--gpu=1\"]}", auth()).status())
                .isEqualTo(201);
        assertThat(scheduler.allocations()).hasSize(1);
    }

    @Test
    void bodyFramingAttacksAre4xxAndTheServerStaysUp() throws Exception {
        // the shortest idle timeout (default 10 s): a body that never ends is cut after it
        startServer(b -> b.idleTimeout(Duration.ofSeconds(1)));
        String h = "POST /api/v1/allocations HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" + auth()
                + "\r\nContent-Type: application/json\r\n";
        // chunked, 64 KiB in 1 KiB chunks, over the 16 KiB limit
        ByteArrayOutputStream chunked = new ByteArrayOutputStream();
        chunked.writeBytes((h + "Transfer-Encoding: chunked\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
        chunked.writeBytes("400\r\n{\"flags\": [\"--owner=".getBytes(StandardCharsets.US_ASCII));
        chunked.writeBytes(("x".repeat(1024 - 20) + "\r\n").getBytes(StandardCharsets.US_ASCII));
        for (int i = 0; i < 63; i++) {
            chunked.writeBytes(("400\r\n" + "x".repeat(1024) + "\r\n").getBytes(StandardCharsets.US_ASCII));
        }
        chunked.writeBytes("0\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
        List<String> fails = new ArrayList<>();
        RawHttp.Resp r = framed("chunked 64 KiB", chunked.toByteArray(), fails);
        if (r != null && r.status() != 413) {
            fails.add("chunked 64 KiB -> " + r + " (want 413)");
        }
        framed("chunk of 2^60", (h + "Transfer-Encoding: chunked\r\n\r\n1000000000000000\r\n{\"flags\"")
                .getBytes(StandardCharsets.US_ASCII), fails);
        for (String cl : List.of("-1", "99999999999999999999", "1e3", "0x10", "10, 10", " ")) {
            framed("Content-Length: " + cl, (h + "Content-Length: " + cl + "\r\n\r\n{\"flags\": [\"--gpu=1\"]}")
                    .getBytes(StandardCharsets.US_ASCII), fails);
        }
        assertThat(fails).isEmpty();
        // a body shorter than declared, then the client half-closes: an answer, not a hang or an allocation
        try (Socket s = new Socket(server.address().getAddress(), port)) {
            s.setSoTimeout(20_000);
            s.getOutputStream().write((h + "Content-Length: 100\r\n\r\n{\"flags\": [\"--gpu=1\"]}")
                    .getBytes(StandardCharsets.US_ASCII));
            s.shutdownOutput();
            String answer = new String(s.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            assertThat(answer).as("short body").doesNotStartWith("HTTP/1.1 2");
        } catch (java.net.SocketException reset) {
            // closed without an answer: also no allocation
        }
        assertThat(scheduler.allocations()).isEmpty();
        assertThat(http.req("GET", "/api/v1/node", null).status()).isEqualTo(200);
    }

    /** a 4xx answer, or the connection closed with no answer at all (the JDK's own framing checks do that) */
    RawHttp.Resp framed(String what, byte[] request, List<String> fails) {
        try {
            RawHttp.Resp r = http.send(request);
            if (r.status() < 400 || r.status() > 499) {
                fails.add(what + " -> " + r);
            }
            return r;
        } catch (SocketTimeoutException held) {
            // neither an answer nor a close: the server held the connection (a body it never cuts)
            fails.add(what + " -> no answer and no close: " + held);
            return null;
        } catch (IOException closed) {
            System.out.println("review2: " + what + " -> connection closed without an answer: " + closed);
            return null;
        }
    }

    // ------------------------------------------------------------------------------------------- token

    @Test
    void tokenVariantsAndTheTokenIsNeverEchoedOrLogged() throws Exception {
        PrintStream err = System.err;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        List<RawHttp.Resp> answers = new ArrayList<>();
        String body = "{\"flags\": [\"--gpu=1\"]}";
        try {
            System.setErr(new PrintStream(captured, true, StandardCharsets.UTF_8));
            // the scheme is case-insensitive (RFC 7235) and surrounding blanks are no part of the token
            for (String a : List.of("bearer " + token, "BEARER " + token, "Bearer " + token + " ",
                    "Bearer  " + token)) {
                RawHttp.Resp r = http.req("POST", "/api/v1/allocations", body, "Authorization: " + a);
                answers.add(r);
                assertThat(r.status()).as("Authorization: %s", a).isEqualTo(201);
            }
            assertThat(scheduler.allocations()).hasSize(4);
            // the token anywhere but the Authorization header: refused
            String half = token.substring(0, token.length() / 2);
            List<String[]> wrong = List.of(new String[]{"Authorization: Bearer " + token.toUpperCase()},
                    new String[]{"Authorization: Bearer" + token}, new String[]{"Authorization: Bearer " + half},
                    new String[]{"Authorization: Bearer " + token + half},
                    new String[]{"Authorization: Token " + token}, new String[]{"Proxy-Authorization: Bearer " + token},
                    new String[]{"Authorization: Bearer " + "\u00e1" + token.substring(1)});
            for (String[] w : wrong) {
                if (token.equals(token.toUpperCase()) && w[0].endsWith(token.toUpperCase())) {
                    continue;
                }
                RawHttp.Resp r = http.req("POST", "/api/v1/allocations", body, w);
                answers.add(r);
                assertThat(r.status()).as("%s", List.of(w)).isEqualTo(401);
            }
            for (String q : List.of("?token=", "?access_token=", "?bearer=", "?Authorization=Bearer%20")) {
                RawHttp.Resp r = http.req("POST", "/api/v1/allocations" + q + token, body);
                answers.add(r);
                assertThat(r.status()).as(q).isEqualTo(401);
                r = http.req("DELETE", "/api/v1/allocations/" + scheduler.allocations().get(0).id() + q + token, null);
                answers.add(r);
                assertThat(r.status()).as("DELETE " + q).isEqualTo(401);
            }
            // a body holding the token is no token
            RawHttp.Resp r = http.req("POST", "/api/v1/allocations", "{\"token\": \"" + token + "\", \"flags\": []}");
            answers.add(r);
            assertThat(r.status()).isEqualTo(401);
            // reads and errors
            answers.add(http.req("GET", "/api/v1/node", null));
            answers.add(http.req("GET", "/api/v1/doctor", null));
            answers.add(http.req("GET", "/metrics", null));
            answers.add(http.req("GET", "/nope", null, "Authorization: Bearer " + token));
            answers.add(http.req("GET", "/api/v1/openapi.json", null));
            answers.add(http.req("POST", "/api/v1/allocations", "{bad", "Authorization: Bearer " + token));
        } finally {
            System.setErr(err);
        }
        assertThat(scheduler.allocations()).hasSize(4);
        for (RawHttp.Resp r : answers) {
            assertThat(r.head() + r.body()).as("an answer echoes the token").doesNotContain(token);
        }
        assertThat(captured.toString(StandardCharsets.UTF_8)).as("log output").doesNotContain(token)
                .doesNotContain(token.substring(0, 16));
    }

    // ------------------------------------------------------------------------------------------- events

    /** opens an event stream, reads until the first state event; returns the socket, or null on a non-200 */
    Socket openStream(String... headers) throws IOException {
        Socket s = new Socket(server.address().getAddress(), port);
        s.setSoTimeout(20_000);
        StringBuilder sb = new StringBuilder("GET /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                + "Accept: text/event-stream\r\n");
        for (String h : headers) {
            sb.append(h).append("\r\n");
        }
        s.getOutputStream().write(sb.append("\r\n").toString().getBytes(StandardCharsets.ISO_8859_1));
        InputStream in = s.getInputStream();
        StringBuilder got = new StringBuilder();
        byte[] buf = new byte[8192];
        while (!got.toString().contains("event: state")) {
            int n = in.read(buf);
            if (n < 0) {
                throw new IOException("stream ended before the first state event: " + got);
            }
            got.append(new String(buf, 0, n, StandardCharsets.UTF_8));
        }
        assertThat(got.toString()).startsWith("HTTP/1.1 200");
        return s;
    }

    double metric(String name) throws IOException {
        RawHttp.Resp r = http.req("GET", "/metrics", null);
        assertThat(r.status()).isEqualTo(200);
        List<Double> v = PromText.parse(r.body()).values(name + "{");
        assertThat(v).as("series %s in /metrics", name).hasSize(1);
        return v.get(0);
    }

    void awaitMetric(String name, double want) throws Exception {
        long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        double last;
        do {
            last = metric(name);
            if (last == want) {
                return;
            }
            Thread.sleep(50);
        } while (System.nanoTime() < deadline);
        throw new AssertionError(name + " stayed at " + last + ", expected " + want + " within 30 s");
    }

    @Test
    void eventClientsThatComeAndGoLeaveNoneCountedAndTheServerAnswers() throws Exception {
        // a header with an unbalanced quote: Jetty's header reader refuses the request (400, the console's JSON,
        // naming the value); no stream is opened and the server goes on answering
        try (Socket s = new Socket(server.address().getAddress(), port)) {
            s.setSoTimeout(20_000);
            s.getOutputStream().write(("GET /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                    + "Last-Event-ID: \u00ff\u00fe%00'\"<script>\r\n\r\n").getBytes(StandardCharsets.ISO_8859_1));
            String answer = new String(s.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            assertThat(answer).startsWith("HTTP/1.1 400").contains("application/json").contains("\"status\":400")
                    .contains("<script>").doesNotContain("text/event-stream");
        }
        for (int round = 0; round < 5; round++) {
            List<Socket> socks = new ArrayList<>();
            for (int i = 0; i < 40; i++) {
                String[] h = switch (i % 5) {
                    case 0 -> new String[]{"Last-Event-ID: -1"};
                    case 1 -> new String[]{"Last-Event-ID: 99999999999999999999999999999"};
                    case 2 -> new String[]{"Last-Event-ID: " + "x".repeat(8000)};
                    case 3 -> new String[]{"Last-Event-ID: \u00ff\u00fe%00'<script>"};
                    default -> new String[0];
                };
                socks.add(openStream(h));
            }
            assertThat(metric("gpusched_console_event_clients")).isGreaterThanOrEqualTo(40);
            for (int i = 0; i < socks.size(); i++) {
                Socket s = socks.get(i);
                if (i % 2 == 0) {
                    s.setSoLinger(true, 0); // reset, not a polite close
                }
                s.close();
            }
            RawHttp.Resp node = http.req("GET", "/api/v1/node", null);
            assertThat(node.status()).as("round %d", round).isEqualTo(200);
        }
        // ticks every 100 ms write to every client: the gone ones are noticed and let go
        awaitMetric("gpusched_console_event_clients", 0);
        awaitMetric("gpusched_console_event_connections", 0);
        assertThat(server.eventClients()).isZero();
        // hanging up is no drop for being slow
        assertThat(metric("gpusched_console_event_dropped_total")).isZero();
        // and a new client still gets its state event
        try (Socket s = openStream()) {
            assertThat(s.isConnected()).isTrue();
        }
    }

    @Test
    void headOnTheEventStreamEndsAndHoldsNoConnection() throws Exception {
        for (int i = 0; i < 20; i++) {
            RawHttp.Resp r = http.req("HEAD", "/api/v1/events", null);
            assertThat(r.status()).isIn(200, 405);
            assertThat(r.body()).isEmpty();
        }
        awaitMetric("gpusched_console_event_connections", 0);
    }

    // ------------------------------------------------------------------------------------------- metrics

    @Test
    void concurrentScrapesAllParseStrictlyAndCountersNeverGoBackWhileAllocationsChange() throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(6);
        AtomicBoolean stop = new AtomicBoolean();
        AtomicInteger changes = new AtomicInteger();
        ConcurrentLinkedQueue<String> problems = new ConcurrentLinkedQueue<>();
        AtomicReference<String> lastText = new AtomicReference<>();
        double forceBefore = PromText.parse(http.req("GET", "/metrics", null).body())
                .values("gpusched_ledger_force_seconds_count").stream().mapToDouble(d -> d).sum();
        try {
            List<Future<?>> changers = new ArrayList<>();
            for (int w = 0; w < 2; w++) {
                final int owner = w;
                changers.add(pool.submit(() -> {
                    for (int i = 0; i < 40 && !stop.get(); i++) {
                        RawHttp.Resp a = http.req("POST", "/api/v1/allocations",
                                "{\"flags\": [\"--gpu=1\", \"--owner=w" + owner + "\"]}", auth());
                        if (a.status() == 201) {
                            changes.incrementAndGet();
                            String loc = a.header("Location");
                            RawHttp.Resp d = http.req("DELETE", loc, null, auth());
                            if (d.status() != 200) {
                                problems.add("DELETE " + loc + " -> " + d);
                            } else {
                                changes.incrementAndGet();
                            }
                        } else if (a.status() != 409 && a.status() != 429) {
                            problems.add("POST -> " + a);
                        }
                    }
                    return null;
                }));
            }
            List<Future<?>> scrapers = new ArrayList<>();
            for (int t = 0; t < 4; t++) {
                scrapers.add(pool.submit(() -> {
                    Map<String, Double> prev = new HashMap<>();
                    for (int i = 0; i < 30; i++) {
                        RawHttp.Resp r = http.req("GET", "/metrics", null);
                        if (r.status() != 200) {
                            problems.add("scrape -> " + r.status());
                            continue;
                        }
                        PromText p;
                        try {
                            p = PromText.parse(r.body());
                        } catch (IllegalStateException e) {
                            problems.add("scrape does not parse: " + e.getMessage());
                            continue;
                        }
                        lastText.set(r.body());
                        p.series.forEach((k, v) -> {
                            String type = p.seriesType.get(k);
                            boolean monotonic = type.equals("counter") || k.contains("_count{")
                                    || (type.equals("histogram") && k.contains("_sum{"))
                                    || k.startsWith("gpusched_ledger_force_seconds_sum");
                            Double before = prev.put(k, v);
                            if (monotonic && before != null && v < before) {
                                problems.add(k + " went back from " + before + " to " + v);
                            }
                        });
                        List<Double> live = p.values("gpusched_allocations_live{");
                        if (live.size() != 1 || live.get(0) < 0 || live.get(0) > 4) {
                            problems.add("gpusched_allocations_live = " + live);
                        }
                    }
                    return null;
                }));
            }
            for (Future<?> f : scrapers) {
                f.get(60, TimeUnit.SECONDS);
            }
            stop.set(true);
            for (Future<?> f : changers) {
                f.get(60, TimeUnit.SECONDS);
            }
        } finally {
            stop.set(true);
            pool.shutdownNow();
        }
        assertThat(problems).isEmpty();
        assertThat(changes.get()).isPositive();
        assertThat(scheduler.allocations()).isEmpty();
        PromText end = PromText.parse(http.req("GET", "/metrics", null).body());
        double forceAfter = end.values("gpusched_ledger_force_seconds_count").stream().mapToDouble(d -> d).sum();
        assertThat(end.values("gpusched_ledger_force_seconds_sum")).hasSize(1).allMatch(v -> v >= 0 && v < 3600);
        // every change forced the ledger at least once together with others (group commit may merge)
        assertThat(forceAfter - forceBefore).as("ledger forces during %d changes", changes.get()).isPositive()
                .isLessThanOrEqualTo(changes.get() * 2.0 + 10);
        assertThat(end.values("gpusched_allocations_live{")).containsExactly(0.0);
        // and a real Prometheus parser agrees on one of the texts scraped under load
        Path promtool = Path.of("/usr/bin/promtool");
        assumeTrue(Files.isExecutable(promtool), "promtool (Debian's prometheus package) is not installed");
        Process p = new ProcessBuilder(promtool.toString(), "check", "metrics").redirectErrorStream(true).start();
        try (OutputStream in = p.getOutputStream()) {
            in.write(lastText.get().getBytes(StandardCharsets.UTF_8));
        }
        String verdict = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
        assertThat(verdict).as(verdict).doesNotContain("text format parsing error")
                .doesNotContainIgnoringCase("error while linting");
    }
}
