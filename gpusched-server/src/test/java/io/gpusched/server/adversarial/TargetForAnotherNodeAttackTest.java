package io.gpusched.server.adversarial;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.server.ConsoleServer;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 36 ("--target othernode::1,2 ignores the host part and allocates GPUs 1 and 2 here: refuse a target for
 * another node"), through the console's REST API, which takes "the CLI's request flags" ({@code {"flags": [...]}}).
 * The fix refuses it in the command only (ThisNode.requireLocalTarget, called by the CLI's RequestFlags); the console
 * parses the same flags with GpuRequests.fromCliFlags and allocates GPUs 1 and 2 of this node for a target that names
 * another one. State is checked through the scheduler itself.
 */
@Tag("adversarial")
class TargetForAnotherNodeAttackTest {
    @TempDir
    Path state;
    SimulatedGpuInventory inventory;
    GpuScheduler scheduler;
    ConsoleServer server;
    final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

    @BeforeEach
    void start() {
        inventory = GpuInventories.simulated("pcie-4xa10");
        scheduler = GpuScheduler.builder().inventory(inventory).auditLogging(false).build();
        server = ConsoleServer.builder().scheduler(scheduler).inventory(inventory).stateDir(state)
                .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).build().start();
    }

    @AfterEach
    void stop() {
        server.close();
        scheduler.close();
        inventory.close();
    }

    @Test
    void aTargetNamingAnotherNodeIsRefusedAndAllocatesNothingHere() throws Exception {
        HttpRequest post = HttpRequest.newBuilder(URI.create(server.url() + "/api/v1/allocations"))
                .timeout(Duration.ofSeconds(10)).header("Authorization", "Bearer " + server.token().value())
                .POST(HttpRequest.BodyPublishers.ofString(
                        "{\"flags\":[\"--target=some-other-node.example::1,2\"]}"))
                .build();
        HttpResponse<String> r = http.send(post, HttpResponse.BodyHandlers.ofString());
        assertThat(scheduler.allocations())
                .as("POST {flags: [--target=some-other-node.example::1,2]} answered %d %s", r.statusCode(), r.body())
                .isEmpty();
        assertThat(r.statusCode()).isBetween(400, 499);
        assertThat(r.body()).contains("some-other-node.example");
    }
}
