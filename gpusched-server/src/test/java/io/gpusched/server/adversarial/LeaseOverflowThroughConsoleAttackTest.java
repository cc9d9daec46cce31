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
 * The console's REST API takes "the CLI's request flags"; a lease whose nanoseconds do not fit in a long (over about
 * 292 years, e.g. {@code --lease=200000d}, which the duration parser accepts) must be a 400 naming {@code --lease},
 * not a server error, and allocate nothing. The scheduler keeps the node ledger on disk, as {@code gpusched serve}
 * does.
 */
@Tag("adversarial")
class LeaseOverflowThroughConsoleAttackTest {
    @TempDir
    Path state;
    SimulatedGpuInventory inventory;
    GpuScheduler scheduler;
    ConsoleServer server;
    final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

    @BeforeEach
    void start() {
        inventory = GpuInventories.simulated("pcie-4xa10");
        scheduler = GpuScheduler.builder().inventory(inventory).auditLogging(false).stateDir(state.resolve("ledger"))
                .build();
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
    void aLeaseTooLongToRecordIsA400NamingTheFlag() throws Exception {
        HttpRequest post = HttpRequest.newBuilder(URI.create(server.url() + "/api/v1/allocations"))
                .timeout(Duration.ofSeconds(10)).header("Authorization", "Bearer " + server.token().value())
                .POST(HttpRequest.BodyPublishers.ofString("{\"flags\":[\"--gpu=1\", \"--lease=200000d\"]}"))
                .build();
        HttpResponse<String> r = http.send(post, HttpResponse.BodyHandlers.ofString());
        assertThat(scheduler.allocations()).as("answered %d %s", r.statusCode(), r.body()).isEmpty();
        assertThat(r.statusCode()).as(r.body()).isEqualTo(400);
        assertThat(r.body()).contains("--lease");
    }
}
