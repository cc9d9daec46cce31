package io.gpusched.server;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.SimulatedGpuInventory;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The Host rule (DNS-rebinding guard) over raw loopback sockets: every path refuses a foreign Host with 421 and a JSON
 * error naming it; loopback names, names given to allowedHosts, and (HTTP/1.0 only) no Host are served; two Hosts or
 * none on HTTP/1.1 are 400. The remote-mode rule (any IP literal, the host's name) is checked on the pure function,
 * so no test listens beyond loopback.
 */
class HostRuleTest {
    @TempDir
    Path state;
    SimulatedGpuInventory inventory;
    GpuScheduler scheduler;
    ConsoleServer server;

    @BeforeEach
    void start() {
        inventory = GpuInventories.simulated("pcie-4xa10");
        scheduler = GpuScheduler.builder().inventory(inventory).auditLogging(false).build();
        server = ConsoleServer.builder().scheduler(scheduler).inventory(inventory).stateDir(state)
                .sampleInterval(Duration.ofMillis(200)).allowedHosts(List.of("GPU-Node-7.example"))
                .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).build().start();
    }

    @AfterEach
    void stop() {
        server.close();
        scheduler.close();
        inventory.close();
    }

    /** @return the status line and the rest, read until the server closes (HEAD and Connection: close) */
    String raw(String request) throws IOException {
        try (Socket s = new Socket(server.address().getAddress(), server.address().getPort())) {
            s.setSoTimeout(20_000);
            s.getOutputStream().write(request.getBytes(StandardCharsets.ISO_8859_1));
            s.getOutputStream().flush();
            ByteArrayOutputStream b = new ByteArrayOutputStream();
            InputStream in = s.getInputStream();
            byte[] buf = new byte[8192];
            int n;
            while ((n = in.read(buf)) >= 0) {
                b.write(buf, 0, n);
            }
            return b.toString(StandardCharsets.UTF_8);
        }
    }

    String get(String path, String hostLines, String protocol) throws IOException {
        return raw("GET " + path + " " + protocol + "\r\n" + hostLines + "Connection: close\r\n\r\n");
    }

    static int status(String answer) {
        return Integer.parseInt(answer.substring(9, 12));
    }

    @Test
    void everyPathRefusesAForeignHostWith421NamingIt() throws Exception {
        int port = server.address().getPort();
        for (String path : List.of("/", "/index.html", "/app.js", "/app.css", "/favicon.svg", "/metrics",
                "/api/v1/openapi.json", "/api/v1/node", "/api/v1/devices", "/api/v1/topology", "/api/v1/samples",
                "/api/v1/doctor", "/api/v1/audit", "/api/v1/events", "/api/v1/allocations", "/api/v1/allocations/x",
                "/no/such/path")) {
            for (String host : List.of("evil.example", "evil.example:" + port, "10.0.0.1:" + port, "[::2]",
                    "localhost.evil.example", "127.0.0.1.evil.example", "127.1", "0.0.0.0", "gpu-node-7.example.evil",
                    "[::1]x", "localhost:abc", "")) {
                String a = get(path, "Host: " + host + "\r\n", "HTTP/1.1");
                if (host.isEmpty()) { // Jetty refuses an empty Host on HTTP/1.1 itself, in the console's JSON
                    assertThat(status(a)).as("GET %s Host: (empty) -> %s", path, a).isEqualTo(400);
                    assertThat(a).contains("application/json").contains("\"status\":400")
                            .doesNotContain("text/event-stream");
                    continue;
                }
                assertThat(status(a)).as("GET %s Host: %s -> %s", path, host, a).isEqualTo(421);
                assertThat(a).contains("application/json").contains("\"status\":421")
                        .contains("Host " + host + " is not served here").contains("localhost, 127.0.0.0/8");
                assertThat(a).doesNotContain("text/event-stream");
            }
        }
    }

    @Test
    void loopbackAndAllowedNamesAreServedWithAnyPort() throws Exception {
        for (String host : List.of("localhost", "LocalHost:1", "127.0.0.1", "127.9.8.7:65535", "[::1]", "[::1]:80",
                "[0:0:0:0:0:0:0:1]", "gpu-node-7.example", "GPU-NODE-7.EXAMPLE:9400")) {
            String a = get("/api/v1/node", "Host: " + host + "\r\n", "HTTP/1.1");
            assertThat(status(a)).as("Host: %s -> %s", host, a).isEqualTo(200);
        }
    }

    @Test
    void noHostIsServedOnHttp10OnlyAndTwoHostsAreRefused() throws Exception {
        assertThat(status(get("/api/v1/node", "", "HTTP/1.0"))).isEqualTo(200);
        String a = get("/api/v1/node", "", "HTTP/1.1");
        assertThat(status(a)).as(a).isEqualTo(400);
        assertThat(a).contains("Host");
        a = get("/api/v1/node", "Host: 127.0.0.1\r\nHost: evil.example\r\n", "HTTP/1.1");
        assertThat(status(a)).as(a).isEqualTo(400);
        a = get("/api/v1/node", "Host: 127.0.0.1\r\nHost: 127.0.0.1\r\n", "HTTP/1.1");
        assertThat(status(a)).as(a).isEqualTo(400);
    }

    @Test
    void aChangeWithAForeignHostIsRefusedBeforeTheScheduler() throws Exception {
        String body = "{\"flags\": [\"--gpu=1\"]}";
        String a = raw("POST /api/v1/allocations HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n"
                + "Authorization: Bearer " + server.token().value() + "\r\nContent-Type: application/json\r\n"
                + "Content-Length: " + body.length() + "\r\n\r\n" + body);
        assertThat(status(a)).as(a).isEqualTo(421);
        assertThat(scheduler.allocations()).isEmpty();
        // the same request with a loopback Host goes through (the refusal was the Host, nothing else)
        a = raw("POST /api/v1/allocations HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
                + "Authorization: Bearer " + server.token().value() + "\r\nContent-Type: application/json\r\n"
                + "Content-Length: " + body.length() + "\r\n\r\n" + body);
        assertThat(status(a)).as(a).isEqualTo(201);
        assertThat(scheduler.allocations()).hasSize(1);
    }

    @Test
    void remoteModeAcceptsIpLiteralsTheHostNameAndAllowedNamesOnly() {
        List<String> allowed = List.of("gpu.example");
        for (String h : List.of("10.1.2.3", "10.1.2.3:9400", "[2001:db8::1]:9400", "[fe80::1]", "localhost",
                "127.0.0.1", "node7", "NODE7:9400", "gpu.example:1")) {
            assertThat(HostFilter.hostAccepted(h, true, allowed, "node7")).as(h).isTrue();
        }
        for (String h : List.of("evil.example", "node7.evil.example", "10.1.2.3.evil.example", "[evil]",
                "[2001:db8::1%eth0]", "10.1.2.256", "1.2.3", "node7:", "node7:x", "", "[::1")) {
            assertThat(HostFilter.hostAccepted(h, true, allowed, "node7")).as(h).isFalse();
        }
        // on loopback, a non-loopback literal and the host's own name are not accepted
        for (String h : List.of("10.1.2.3", "[2001:db8::1]", "node7")) {
            assertThat(HostFilter.hostAccepted(h, false, allowed, "node7")).as(h).isFalse();
        }
    }

    @Test
    void badAllowedHostNamesAreRefusedByTheBuilder() {
        for (String bad : List.of("", "http://x", "x:9400", "a b", "ev\u0131l", "x/y")) {
            org.assertj.core.api.Assertions.assertThatThrownBy(() -> ConsoleServer.builder().allowedHosts(List.of(bad)))
                    .as(bad).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("--allowed-host");
        }
    }
}
