package io.gpusched.server.adversarial;

import static org.assertj.core.api.Assertions.assertThat;

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
     * /api/v1/allocations} and of a 100-allocation page, against that attack's own 2 MiB bound.
     */
    @Test
    void devicesAndUnpagedListsStayBoundedOnAFullNodeOfLongestFields() throws Exception {
        SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100");
        try (GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false).build();
             ConsoleServer c = console(s, state)) {
            fill(s, 8 * 48, 48);
            HttpClient http = HttpClient.newHttpClient();
            long devices = bytes(get(http, c, "/api/v1/devices"));
            long all = bytes(get(http, c, "/api/v1/allocations"));
            long page = bytes(get(http, c, "/api/v1/allocations?offset=0&limit=100"));
            System.out.printf("full dgx1-v100 (384 allocations): GET /api/v1/devices %,d bytes, GET /api/v1/allocations"
                    + " %,d bytes, one page of 100 %,d bytes%n", devices, all, page);
            assertThat(devices).as("GET /api/v1/devices, bytes").isLessThan(2L << 20);
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
}
