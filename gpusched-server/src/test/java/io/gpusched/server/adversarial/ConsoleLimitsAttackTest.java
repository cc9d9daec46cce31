package io.gpusched.server.adversarial;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.server.ConsoleServer;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The console's own limits: event-stream slots given back after abrupt clients; the ledger's rate limit over REST. */
@Tag("adversarial")
class ConsoleLimitsAttackTest {
    static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path state;

    static double metric(RawHttp http, String series) throws IOException {
        RawHttp.Resp r = http.req("GET", "/metrics", null);
        assertThat(r.status()).isEqualTo(200);
        List<Double> v = PromText.parse(r.body()).values(series);
        return v.stream().mapToDouble(d -> d).sum();
    }

    static int streamStatus(ConsoleServer c) throws IOException {
        try (Socket s = new Socket(c.address().getAddress(), c.address().getPort())) {
            s.setSoTimeout(20_000);
            s.getOutputStream().write("GET /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                    .getBytes(StandardCharsets.US_ASCII));
            byte[] head = s.getInputStream().readNBytes(12);
            return Integer.parseInt(new String(head, StandardCharsets.US_ASCII).substring(9, 12));
        }
    }

    @Test
    void eventSlotsComeBackAfterClientsThatResetBeforeTheirFirstEvent() throws Exception {
        SimulatedGpuInventory inv = GpuInventories.simulated("pcie-4xa10");
        try (GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false).build();
             ConsoleServer c = ConsoleServer.builder().scheduler(s).inventory(inv).stateDir(state).maxSseClients(5)
                     .sampleInterval(Duration.ofMillis(100))
                     .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).build().start()) {
            RawHttp http = new RawHttp(c.address());
            // 60 clients that ask for the stream and reset at once, 12 times the slot count
            for (int i = 0; i < 60; i++) {
                try (Socket k = new Socket(c.address().getAddress(), c.address().getPort())) {
                    k.getOutputStream().write("GET /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                            .getBytes(StandardCharsets.US_ASCII));
                    if (i % 3 == 0) {
                        k.getInputStream().read(); // some wait for the first byte of the answer
                    }
                    k.setSoLinger(true, 0);
                }
            }
            // a reset is seen at the stream's next write (a tick, at the latest the 15-s heartbeat): up to 60 s for
            // the slots to come back on a loaded host
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            double held;
            while ((held = metric(http, "gpusched_console_event_connections")) > 0 && System.nanoTime() < deadline) {
                Thread.sleep(50);
            }
            assertThat(held).as("event-stream connections held 60 s after every client reset").isZero();
            // all five slots usable again, the sixth refused with 503
            List<Socket> open = new ArrayList<>();
            try {
                for (int i = 0; i < 5; i++) {
                    Socket k = new Socket(c.address().getAddress(), c.address().getPort());
                    open.add(k);
                    k.setSoTimeout(20_000);
                    k.getOutputStream().write("GET /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                            .getBytes(StandardCharsets.US_ASCII));
                    InputStream in = k.getInputStream();
                    String head = new String(in.readNBytes(12), StandardCharsets.US_ASCII);
                    assertThat(head).as("stream %d", i).endsWith("200");
                }
                assertThat(streamStatus(c)).isEqualTo(503);
            } finally {
                for (Socket k : open) {
                    k.close();
                }
            }
            assertThat(http.req("GET", "/api/v1/node", null).status()).isEqualTo(200);
        } finally {
            inv.close();
        }
    }

    @Test
    void theLedgerRateLimitAppliesOverRestAndIsCountedByReason() throws Exception {
        GpuConfig config = GpuConfig.parse("gpu:\n  rate_limit: {per_owner_per_second: 0.001, burst: 3}\n",
                "review2");
        SimulatedGpuInventory inv = GpuInventories.simulated("pcie-4xa10");
        try (GpuScheduler s = GpuScheduler.builder().inventory(inv).config(config).auditLogging(false).build();
             ConsoleServer c = ConsoleServer.builder().scheduler(s).inventory(inv).stateDir(state)
                     .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).build().start()) {
            RawHttp http = new RawHttp(c.address());
            String auth = "Authorization: Bearer " + c.token().value();
            int granted = 0;
            int limited = 0;
            for (int i = 0; i < 8; i++) {
                RawHttp.Resp r =
                        http.req("POST", "/api/v1/allocations", "{\"flags\": [\"--gpu=1\", \"--owner=alice\"]}",
                                auth);
                if (r.status() == 201) {
                    granted++;
                    assertThat(http.req("DELETE", r.header("Location"), null, auth).status()).isEqualTo(200);
                } else {
                    assertThat(r.status()).as("attempt %d: %s", i, r).isEqualTo(429);
                    JsonNode e = JSON.readTree(r.body());
                    assertThat(e.path("reason").asText()).isEqualTo("RATE_LIMITED");
                    assertThat(e.path("error").asText()).isNotBlank();
                    limited++;
                }
            }
            assertThat(granted).as("the burst").isEqualTo(3);
            assertThat(limited).isEqualTo(5);
            // another owner has a bucket of its own
            assertThat(http.req("POST", "/api/v1/allocations", "{\"flags\": [\"--gpu=1\", \"--owner=bob\"]}", auth)
                    .status()).isEqualTo(201);
            assertThat(metric(http, "gpusched_refusals_total{reason=RATE_LIMITED}")).isEqualTo(5.0);
            assertThat(s.allocations()).hasSize(1);
        } finally {
            inv.close();
        }
    }

    /**
     * Unauthenticated loopback clients must not be able to write the host's log at will: a HEAD on the event stream
     * once made the server answer a HEAD with a streamed body, which the JDK server logged at WARNING each time
     * (found in a review: 50 HEADs, 50 warnings; fixed in 467f263, HEAD answers the headers only). The server is Jetty
     * now, logging through slf4j (slf4j-simple in tests, to the standard error stream): no WARN line for 50 HEADs.
     */
    @Test
    void headOnTheEventStreamDoesNotWriteTheLog() throws Exception {
        SimulatedGpuInventory inv = GpuInventories.simulated("pcie-4xa10");
        PrintStream err = System.err;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        try (GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false).build();
             ConsoleServer c = ConsoleServer.builder().scheduler(s).inventory(inv).stateDir(state)
                     .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).build().start()) {
            RawHttp http = new RawHttp(c.address());
            System.setErr(new PrintStream(captured, true, StandardCharsets.UTF_8));
            for (int i = 0; i < 50; i++) {
                assertThat(http.req("HEAD", "/api/v1/events", null).status()).isEqualTo(200);
            }
            assertThat(http.req("GET", "/api/v1/node", null).status()).isEqualTo(200);
        } finally {
            System.setErr(err);
            inv.close();
        }
        assertThat(captured.toString(StandardCharsets.UTF_8).lines().filter(l -> l.contains("WARN")).toList())
                .as("warnings logged by 50 HEAD /api/v1/events").isEmpty();
    }
}
