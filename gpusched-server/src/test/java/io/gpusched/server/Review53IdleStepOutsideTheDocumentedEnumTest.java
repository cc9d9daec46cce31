package io.gpusched.server;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.NodeDescriptions;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.testing.ManualClock;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review 53: {@code GET /api/v1/usage/idle} answers each idle allocation's last step of its idle stretch as
 * {@code step}, lower case, and the OpenAPI document the console serves lists its values: flagged, warned, released,
 * signalled, dry_run, busy_again, skipped, failed, null. The idle policy also audits {@code STARTED_OVER} (after a gap
 * of more than 10 minutes no sweep measured, the meter starts the idle clock over: docs/ACCOUNTING.md), at the sweep
 * the new stretch starts from, so until that stretch is flagged again (30 minutes by default) it is its last step
 * and the endpoint answers {@code "step": "started_over"}: a value the document does not allow, which a client
 * generated from it refuses. ({@code status} hides that step, {@code IdleStatus.describe}; the REST view does not.)
 *
 * <p>The store holds what the sampler writes in that case: the allocation's interval idle since the sweep after the
 * gap, and the policy's {@code STARTED_OVER} step at that sweep.
 */
class Review53IdleStepOutsideTheDocumentedEnumTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private final HttpClient http = HttpClient.newHttpClient();

    @Test
    void everyIdleStepTheEndpointAnswersIsOneTheOpenApiDocumentAllows(@TempDir Path state) throws Exception {
        Instant t0 = Instant.parse("2026-06-01T08:00:00Z");
        long ms = t0.toEpochMilli();
        Path acct = Files.createDirectories(state.resolve("accounting"));
        Files.writeString(acct.resolve("2026-06-01.log"), String.join("", List.of(
                line("{\"k\":\"i\",\"id\":\"a1-1\",\"owner\":\"alice\",\"from\":" + ms + ",\"to\":" + (ms + 60_000)
                        + ",\"first\":true,\"idle\":" + (ms + 10_000) + ",\"gpus\":[{\"i\":0,\"uuid\":\"GPU-0\","
                        + "\"held\":60000,\"meas\":60000,\"um\":60000,\"us\":0.0,\"up\":0.0,\"idle\":50000,\"e\":0,"
                        + "\"ee\":0,\"em\":0}]}"),
                line("{\"k\":\"a\",\"at\":" + (ms + 10_000) + ",\"id\":\"a1-1\",\"owner\":\"alice\",\"action\":"
                        + "\"STARTED_OVER\",\"idleFor\":0,\"detail\":\"its idle clock starts over: 2 h no sweep"
                        + " measured\"}"),
                line("{\"k\":\"c\",\"at\":" + (ms + 60_000) + ",\"open\":[\"a1-1\"]}"))),
                StandardCharsets.UTF_8);
        ManualClock clock = new ManualClock(t0.plus(Duration.ofSeconds(70)));
        SimulatedGpuInventory inv = NodeDescriptions.profile("pcie-4xa10", clock);
        try (GpuScheduler s = GpuScheduler.builder().inventory(inv).clock(clock).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).build();
             ConsoleServer c = ConsoleServer.builder().scheduler(s).stateDir(state).clock(clock).ticking(false)
                     .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).build().start()) {
            JsonNode api = JSON.readTree(get(c, "/api/v1/openapi.json").body());
            JsonNode enumeration = api.get("paths").get("/api/v1/usage/idle").get("get").get("responses").get("200")
                    .get("content").get("application/json").get("schema").get("items").get("properties")
                    .get("step").get("enum");
            List<String> allowed = new ArrayList<>();
            enumeration.forEach(v -> allowed.add(v.isNull() ? null : v.asText()));

            HttpResponse<String> r = get(c, "/api/v1/usage/idle");
            assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
            JsonNode idle = JSON.readTree(r.body());
            assertThat(idle.size()).as("the premise: a1-1 is listed idle: %s", r.body()).isEqualTo(1);
            for (JsonNode e : idle) {
                String step = e.get("step").isNull() ? null : e.get("step").asText();
                assertThat(allowed)
                        .as("GET /api/v1/usage/idle answered %s; expected every \"step\" to be one of the OpenAPI"
                                + " document's values %s (or the document to list it)", r.body(), allowed)
                        .contains(step);
            }
        }
    }

    private HttpResponse<String> get(ConsoleServer c, String path) throws Exception {
        return http.send(HttpRequest.newBuilder(URI.create(c.url() + path)).build(),
                HttpResponse.BodyHandlers.ofString());
    }

    private static String line(String json) {
        CRC32C c = new CRC32C();
        byte[] b = json.getBytes(StandardCharsets.UTF_8);
        c.update(b, 0, b.length);
        return String.format("%08x", c.getValue()) + " " + json + "\n";
    }
}
