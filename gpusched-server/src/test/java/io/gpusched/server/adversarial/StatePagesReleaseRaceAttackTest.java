package io.gpusched.server.adversarial;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.server.ConsoleServer;
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
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 36 item 5, the fix's truncated {@code state} event and its REST pages ({@code GET
 * /api/v1/allocations?offset&limit}; README: the page reads the rest page by page): a release by another client
 * between the state event and the pages shifts every later allocation one place down, so the allocation at the
 * marker's offset is on no page, and no delta names it (it did not change): the page never lists a live allocation.
 */
@Tag("adversarial")
class StatePagesReleaseRaceAttackTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String WIDE = new String(Character.toChars(0x1F600)); // 4 bytes in UTF-8

    @TempDir
    Path state;

    private static ConsoleServer console(GpuScheduler s, Path state) {
        return ConsoleServer.builder().scheduler(s).stateDir(state)
                .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).build().start();
    }

    private static void fill(GpuScheduler s, int count, int perGpu) {
        for (int n = 0; n < count; n++) {
            List<String> f = new ArrayList<>(List.of("--devices=" + (n / perGpu % 8), "--shared=32MiB",
                    "--owner=" + WIDE.repeat(120) + n, "--job=" + WIDE.repeat(250) + n));
            for (int l = 0; l < 64; l++) {
                f.add("--label=" + WIDE.repeat(60) + l + "=" + WIDE.repeat(256));
            }
            s.allocate(GpuRequests.fromCliFlags(f));
        }
    }

    /**
     * The page's algorithm (app.js fetchRest): the state event's allocations, then pages from the marker's rest link,
     * each next page after the last id read (first written against offset paging, offset += page size). One of the
     * allocations the state event already sent is released before the pages are read
     * (as any other client may do at any time): every allocation that stayed live throughout must still be listed.
     */
    @Test
    void aReleaseBetweenTheStateEventAndItsPagesLosesNoLiveAllocation() throws Exception {
        SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100");
        try (GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false).build();
             ConsoleServer c = console(s, state)) {
            fill(s, 120, 15);
            HttpClient http = HttpClient.newHttpClient();
            JsonNode st = JSON.readTree(stateEvent(http, c));
            JsonNode t = st.path("truncated");
            assertThat(t.path("reason").asText()).as("precondition: a truncated state event").isEqualTo(
                    "STATE_EVENT_BOUND");
            Set<String> seen = new LinkedHashSet<>();
            st.path("allocations").forEach(a -> seen.add(a.path("id").asText()));
            String released = seen.iterator().next();
            s.release(released); // another client, between the state event and the first page
            seen.remove(released); // the delta's "remove"

            // the page follows the marker's rest link (a cursor since the fix), each next page after the last id
            String next = t.path("rest").asText();
            int limit = 25;
            for (int pages = 0; pages < 100; pages++) {
                URI u = URI.create(c.url() + next);
                String after = u.getRawQuery().replaceAll("^(?:.*&)?after=([^&]*).*$", "$1");
                HttpResponse<String> r = get(http, c, "/api/v1/allocations?after=" + after + "&limit=" + limit);
                assertThat(r.statusCode()).isEqualTo(200);
                JsonNode page = JSON.readTree(r.body());
                page.forEach(a -> seen.add(a.path("id").asText()));
                if (page.size() < limit) {
                    break;
                }
                next = "/api/v1/allocations?after=" + page.get(page.size() - 1).path("id").asText() + "&limit="
                        + limit;
            }
            List<String> live = s.allocations().stream().map(Allocation::id).toList();
            assertThat(seen).as("the state event plus its pages, after %s was released between them", released)
                    .containsExactlyInAnyOrderElementsOf(live);
        } finally {
            inv.close();
        }
    }

    private static long bytes(HttpResponse<String> r) {
        assertThat(r.statusCode()).isEqualTo(200);
        return r.body().getBytes(StandardCharsets.UTF_8).length;
    }

    private static HttpResponse<String> get(HttpClient http, ConsoleServer c, String path) throws Exception {
        return http.send(HttpRequest.newBuilder(URI.create(c.url() + path)).timeout(Duration.ofSeconds(60)).build(),
                HttpResponse.BodyHandlers.ofString());
    }

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
