package io.gpusched.server;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.SimulatedGpuInventory;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 36: the console's doctor panel for a simulated node described the host. {@code /api/v1/doctor} now names the
 * node it serves (simulated, its GPUs and driver) and judges CUDA against that node's driver; the host alone (no
 * inventory) has no node.
 */
class DoctorSimulatedNodeTest {

    @Test
    void theConsolesDoctorDescribesItsSimulatedNode(@TempDir Path state) throws Exception {
        SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100");
        try (GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false).build();
             ConsoleServer c = ConsoleServer.builder().scheduler(s).inventory(inv).stateDir(state)
                     .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).build().start()) {
            HttpResponse<String> r = HttpClient.newHttpClient().send(HttpRequest.newBuilder(
                    URI.create(c.url() + "/api/v1/doctor")).build(), HttpResponse.BodyHandlers.ofString());
            assertThat(r.statusCode()).isEqualTo(200);
            JsonNode d = new ObjectMapper().readTree(r.body());
            assertThat(d.path("node").path("simulated").asBoolean()).as(r.body()).isTrue();
            assertThat(d.path("node").path("backend").asText()).isEqualTo("simulated:dgx1-v100");
            assertThat(d.path("node").path("gpus").asInt()).isEqualTo(8);
            String driver = inv.devices().get(0).driverVersion().orElseThrow();
            assertThat(d.path("node").path("driver").asText()).isEqualTo(driver);
            assertThat(d.path("driver").asText()).as("CUDA judged against the node's driver").isEqualTo(driver);
        }
        assertThat(DoctorReport.collect(List.of()).node()).as("the host alone").isNull();
    }
}
