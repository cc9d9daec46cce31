package io.gpusched.server.adversarial;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
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
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 36 item 5 ("events that carry changes rather than the whole state each time"; the fix bounds the {@code state}
 * event at 128 KiB of allocations): a {@code delta} event has no bound. Another process of the node (a library host,
 * a Spark driver) makes 160 allocations (20 shares of each GPU) whose fields are at the console's own cuts between two
 * of the console's catch-ups; the console's next push (here: its own scheduler's next allocation) sends them all in
 * one delta, to every stream. Its size is checked against the state-event attack's own 2 MiB bound.
 */
@Tag("adversarial")
class DeltaEventSizeAttackTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String WIDE = new String(Character.toChars(0x1F600)); // 4 bytes in UTF-8

    @TempDir
    Path state;

    private GpuScheduler open(SimulatedGpuInventory inv) {
        // no maintenance thread: the console catches up only when the test makes it push
        return GpuScheduler.builder().inventory(inv).stateDir(state.resolve("node")).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).build();
    }

    @Test
    void oneDeltaAfterAnotherProcesssBurstStaysBounded() throws Exception {
        SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100");
        try (GpuScheduler console = open(inv); GpuScheduler other = open(inv);
             ConsoleServer c = ConsoleServer.builder().scheduler(console).stateDir(state.resolve("console"))
                     .sampleInterval(Duration.ofMinutes(5)) // the most allowed: no tick but the first one
                     .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).build().start()) {
            HttpClient http = HttpClient.newHttpClient();
            HttpResponse<InputStream> r = http.send(HttpRequest.newBuilder(URI.create(c.url() + "/api/v1/events"))
                    .timeout(Duration.ofSeconds(60)).build(), HttpResponse.BodyHandlers.ofInputStream());
            try (BufferedReader in = new BufferedReader(new InputStreamReader(r.body(), StandardCharsets.UTF_8))) {
                assertThat(next(in, "state")).isNotNull();
                int n = 0;
                for (int g = 0; g < 8; g++) {
                    for (int k = 0; k < 20; k++, n++) {
                        // every field at the console's own cut (256 UTF-8 bytes; keys at the request's 63)
                        List<String> f = new ArrayList<>(List.of("--devices=" + g, "--shared=32MiB",
                                "--owner=" + WIDE.repeat(63) + "o" + n, "--job=" + WIDE.repeat(63) + "j" + n));
                        for (int l = 0; l < 32; l++) {
                            f.add("--label=" + WIDE.repeat(61) + (char) ('a' + l / 26) + (char) ('a' + l % 26) + "="
                                    + WIDE.repeat(64));
                        }
                        other.allocate(GpuRequests.fromCliFlags(f));
                    }
                }
                console.allocate(GpuRequests.fromCliFlags("--devices=0", "--shared=32MiB", "--owner=me"));
                Set<String> upserted = new HashSet<>();
                long largest = 0;
                while (upserted.size() < n + 1) {
                    String data = next(in, "delta");
                    assertThat(data).as("a delta (%d of %d allocations upserted so far)", upserted.size(), n + 1)
                            .isNotNull();
                    largest = Math.max(largest, data.getBytes(StandardCharsets.UTF_8).length);
                    JsonNode d = JSON.readTree(data);
                    d.path("allocations").path("upsert").forEach(a -> upserted.add(a.path("id").asText()));
                }
                System.out.printf("largest delta event after %d allocations of another process: %,d bytes%n", n,
                        largest);
                assertThat(largest).as("the largest delta event, bytes").isLessThan(2L << 20);
            }
        } finally {
            inv.close();
        }
    }

    /** @return the data of the next event of that type, or null at the end of the stream */
    private static String next(BufferedReader in, String type) throws Exception {
        String event = null;
        StringBuilder data = new StringBuilder();
        for (String line; (line = in.readLine()) != null;) {
            if (line.startsWith("event: ")) {
                event = line.substring(7);
            } else if (line.startsWith("data: ")) {
                data.append(line.substring(6));
            } else if (line.isEmpty()) {
                if (type.equals(event)) {
                    return data.toString();
                }
                event = null;
                data.setLength(0);
            }
        }
        return null;
    }
}
