package io.gpusched.server;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.SimulatedGpuInventory;
import java.io.BufferedReader;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The {@code state} event is bounded: fields in UTF-8 bytes, devices without holders (the page derives them), and at
 * most {@link NodeWatcher#MAX_STATE_ALLOCATION_BYTES} of allocations, with a {@code truncated} marker naming the REST
 * page (a cursor: after the last id sent) where the rest start; following the pages gives every allocation, each once.
 */
class StateEventBoundTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path state;

    @Test
    void fieldsAreCutInUtf8BytesAtWholeCharacters() {
        String wide = new String(Character.toChars(0x1F600)); // 4 bytes
        assertThat(Views.bounded("a".repeat(256))).isEqualTo("a".repeat(256));
        assertThat(Views.bounded(wide.repeat(64))).isEqualTo(wide.repeat(64));
        assertThat(Views.bounded(wide.repeat(65))).isEqualTo(wide.repeat(64) + "\u2026(+1)");
        assertThat(Views.bounded("a" + wide.repeat(70))).isEqualTo("a" + wide.repeat(63) + "\u2026(+7)");
        assertThat(Views.bounded("\u00e9".repeat(200))).isEqualTo("\u00e9".repeat(128) + "\u2026(+72)");
    }

    @Test
    void aTruncatedStateNamesThePagesOfTheRest() throws Exception {
        SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100");
        try (GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false).build();
             ConsoleServer c = ConsoleServer.builder().scheduler(s).stateDir(state).ticking(false)
                     .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).build().start()) {
            String wide = new String(Character.toChars(0x1F600));
            for (int n = 0; n < 120; n++) {
                List<String> f = new ArrayList<>(List.of("--devices=" + (n % 8), "--shared=32MiB",
                        "--owner=" + wide.repeat(120) + n));
                for (int l = 0; l < 40; l++) {
                    f.add("--label=k" + l + "=" + wide.repeat(256));
                }
                s.allocate(GpuRequests.fromCliFlags(f));
            }
            HttpClient http = HttpClient.newHttpClient();
            String data = stateEvent(http, c);
            // as sent: UTF-8 (the devices' views are a few KiB)
            assertThat(data.getBytes(StandardCharsets.UTF_8).length)
                    .isLessThanOrEqualTo(NodeWatcher.MAX_STATE_ALLOCATION_BYTES + 16 * 1024);
            JsonNode st = JSON.readTree(data);
            assertThat(st.path("devices")).hasSize(8).allSatisfy(d -> assertThat(d.has("holders")).isFalse());
            JsonNode t = st.path("truncated");
            assertThat(t.path("reason").asText()).isEqualTo("STATE_EVENT_BOUND");
            int sent = st.path("allocations").size();
            assertThat(sent).isPositive().isLessThan(120);
            assertThat(t.path("allocationsSent").asInt()).isEqualTo(sent);
            assertThat(t.path("allocationsTotal").asInt()).isEqualTo(120);
            for (JsonNode a : st.path("allocations")) {
                assertThat(a.path("owner").asText().getBytes(StandardCharsets.UTF_8).length).isLessThan(256 + 16);
                assertThat(a.path("labels").size()).isEqualTo(Views.MAX_LABELS);
                a.path("labels").forEach(v -> assertThat(v.asText().getBytes(StandardCharsets.UTF_8).length)
                        .isLessThan(256 + 16));
            }
            Set<String> ids = new LinkedHashSet<>();
            st.path("allocations").forEach(a -> ids.add(a.path("id").asText()));
            String last = st.path("allocations").get(sent - 1).path("id").asText();
            String next = t.path("rest").asText();
            assertThat(next).isEqualTo("/api/v1/allocations?after=" + last + "&limit=" + AllocationsHandler.MAX_PAGE);
            Set<String> byOffset = new LinkedHashSet<>(ids);
            while (true) {
                HttpResponse<String> r = get(http, c, "/api/v1/allocations?after=" + last + "&limit=25");
                assertThat(r.statusCode()).isEqualTo(200);
                assertThat(r.headers().firstValue("X-Total-Count")).contains("120");
                JsonNode page = JSON.readTree(r.body());
                page.forEach(a -> assertThat(ids.add(a.path("id").asText())).as("each allocation once").isTrue());
                if (page.size() < 25) {
                    break;
                }
                last = page.get(page.size() - 1).path("id").asText();
            }
            // offset still pages the same order
            for (int offset = sent;; offset += 25) {
                String path = "/api/v1/allocations?offset=" + offset + "&limit=25";
                JsonNode page = JSON.readTree(get(http, c, path).body());
                page.forEach(a -> assertThat(byOffset.add(a.path("id").asText())).as("each allocation once").isTrue());
                if (page.size() < 25) {
                    break;
                }
            }
            assertThat(byOffset).containsExactlyElementsOf(ids);
            assertThat(ids).containsExactlyElementsOf(s.allocations().stream().map(Allocation::id).toList());
            for (String bad : List.of("offset=-1", "offset=%D9%A3", "limit=0", "limit=501", "offset=1&offset=2",
                    "limit=x", "after=", "after=" + "x".repeat(257), "after=a&offset=1", "after=a&after=b", "device=8",
                    "device=-1", "device=%D9%A3", "device=", "device=0&device=1")) {
                HttpResponse<String> r = get(http, c, "/api/v1/allocations?" + bad);
                assertThat(r.statusCode()).as(bad).isEqualTo(400);
                assertThat(r.body()).as(bad).containsAnyOf("offset", "limit", "after", "device");
            }
        } finally {
            inv.close();
        }
    }

    private static HttpResponse<String> get(HttpClient http, ConsoleServer c, String path) throws Exception {
        return http.send(HttpRequest.newBuilder(URI.create(c.url() + path)).timeout(Duration.ofSeconds(60)).build(),
                HttpResponse.BodyHandlers.ofString());
    }

    /** @return the data of the stream's first event, {@code state} */
    private static String stateEvent(HttpClient http, ConsoleServer c) throws Exception {
        HttpResponse<InputStream> r = http.send(HttpRequest.newBuilder(URI.create(c.url() + "/api/v1/events"))
                .timeout(Duration.ofSeconds(60)).build(), HttpResponse.BodyHandlers.ofInputStream());
        try (BufferedReader in = new BufferedReader(new InputStreamReader(r.body(), StandardCharsets.UTF_8))) {
            boolean inState = false;
            StringBuilder data = new StringBuilder();
            for (String line; (line = in.readLine()) != null;) {
                inState |= line.equals("event: state");
                if (inState && line.startsWith("data: ")) {
                    data.append(line.substring(6));
                } else if (inState && line.isEmpty()) {
                    return data.toString();
                }
            }
            throw new AssertionError("no state event");
        }
    }
}
