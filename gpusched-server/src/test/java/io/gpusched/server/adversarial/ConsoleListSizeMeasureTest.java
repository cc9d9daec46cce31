package io.gpusched.server.adversarial;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.server.ConsoleServer;
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
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 36 item 5, measured: on a DGX-1 full of shared allocations (8 GPUs x 48) with the longest fields every bound
 * allows (the state-event attack's node), the bytes of {@code GET /api/v1/devices} (holders per device), of the unpaged
 * {@code GET /api/v1/allocations} and of one 100-allocation page, against that attack's own 2 MiB bound.
 */
@Tag("adversarial")
class ConsoleListSizeMeasureTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Pattern NEXT = Pattern.compile("<([^>]*)>\\s*;\\s*rel=\"next\"");
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
     * Measured: a DGX-1 full of shared allocations (8 GPUs x 48) with the longest fields every bound allows, as the
     * state-event attack made it: the bytes of {@code GET /api/v1/devices}, of the unpaged {@code GET
     * /api/v1/allocations} and of a 100-allocation page, against that attack's own 2 MiB bound. Another user's
     * allocation is there before the flood: the same requests are measured before and after it. Each bound is a
     * documented part of the answer: {@code holdersTotal} and {@code X-Total-Count} count everything, a
     * {@code Link rel="next"} names the next page, and following the links reads every allocation exactly once.
     */
    @Test
    void devicesAndUnpagedListsStayBoundedOnAFullNodeOfLongestFields() throws Exception {
        SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100");
        try (GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false).build();
             ConsoleServer c = console(s, state)) {
            HttpClient http = HttpClient.newHttpClient();
            String bob = s.allocate(GpuRequests.fromCliFlags(List.of("--devices=7", "--shared=32MiB", "--owner=bob")))
                    .id();
            long devicesBefore = bytes(get(http, c, "/api/v1/devices"));
            long allBefore = bytes(get(http, c, "/api/v1/allocations"));
            fill(s, 8 * 48 - 1, 48); // bob holds GPU 7's 48th share
            HttpResponse<String> d = get(http, c, "/api/v1/devices");
            HttpResponse<String> first = get(http, c, "/api/v1/allocations");
            long devices = bytes(d);
            long all = bytes(first);
            long page = bytes(get(http, c, "/api/v1/allocations?offset=0&limit=100"));
            System.out.printf("full dgx1-v100 (384 allocations; before the flood 1): GET /api/v1/devices %,d bytes"
                    + " (before %,d), GET /api/v1/allocations %,d bytes (before %,d), one page of 100 %,d bytes%n",
                    devices, devicesBefore, all, allBefore, page);
            assertThat(devices).as("GET /api/v1/devices, bytes").isLessThan(2L << 20);
            assertThat(all).as("GET /api/v1/allocations (no parameters), bytes").isLessThan(2L << 20);
            assertThat(page).as("GET /api/v1/allocations?offset=0&limit=100, bytes").isLessThan(2L << 20);

            // the parts say they are parts: every device counts its 48 holders and lists fewer
            for (JsonNode dev : JSON.readTree(d.body())) {
                int index = dev.path("index").asInt();
                assertThat(dev.path("holdersTotal").asInt()).as("GPU %d holdersTotal", index).isEqualTo(48);
                assertThat(dev.path("holders").size()).as("GPU %d holders listed", index).isBetween(1, 47);
                // the pointer the docs give: ?device= pages through them all
                assertThat(followAll(http, c, "/api/v1/allocations?device=" + index)).as("GPU %d by ?device=", index)
                        .hasSize(48);
            }
            assertThat(first.headers().firstValue("X-Total-Count")).contains("384");
            assertThat(first.headers().firstValue("Link")).as("a cut list names its next page").isPresent();
            List<String> read = followAll(http, c, "/api/v1/allocations");
            assertThat(read).as("every allocation, by following Link rel=next").doesNotHaveDuplicates()
                    .containsExactlyInAnyOrderElementsOf(s.allocations().stream().map(a -> a.id()).toList())
                    .contains(bob);
        } finally {
            inv.close();
        }
    }

    /** @return the ids of every page from {@code path} on, following each page's {@code Link rel="next"} */
    private static List<String> followAll(HttpClient http, ConsoleServer c, String path) throws Exception {
        List<String> ids = new ArrayList<>();
        String next = path;
        for (int pages = 0; next != null; pages++) {
            assertThat(pages).as("pages from " + path).isLessThan(1000);
            HttpResponse<String> r = get(http, c, next);
            assertThat(bytes(r)).as(next + ", bytes").isLessThan(2L << 20);
            JSON.readTree(r.body()).forEach(a -> ids.add(a.path("id").asText()));
            Matcher m = NEXT.matcher(r.headers().firstValue("Link").orElse(""));
            next = m.find() ? m.group(1) : null;
        }
        return ids;
    }

    private static long bytes(HttpResponse<String> r) {
        assertThat(r.statusCode()).isEqualTo(200);
        return r.body().getBytes(StandardCharsets.UTF_8).length;
    }

    private static HttpResponse<String> get(HttpClient http, ConsoleServer c, String path) throws Exception {
        return http.send(HttpRequest.newBuilder(URI.create(c.url() + path)).timeout(Duration.ofSeconds(60)).build(),
                HttpResponse.BodyHandlers.ofString());
    }
}
