package io.gpusched.server;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.SimulatedGpuInventory;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The console's builder: only the scheduler is required, settings are checked where they are set. */
class ConsoleBuilderTest {
    @TempDir
    Path dir;

    private static InetSocketAddress anyLoopbackPort() {
        return new InetSocketAddress(InetAddress.getLoopbackAddress(), 0);
    }

    @Test
    void theSchedulerAloneIsEnoughWhenItHasAStateDirectory() throws Exception {
        Path state = Files.createDirectory(dir.resolve("state"));
        try (SimulatedGpuInventory inv = GpuInventories.simulated("pcie-4xa10");
             GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false).stateDir(state).build();
             ConsoleServer c = ConsoleServer.builder().scheduler(s).listen(anyLoopbackPort()).build().start()) {
            assertThat(c.token().file()).isEqualTo(state.resolve(ApiToken.FILE_NAME));
            HttpResponse<String> node = HttpClient.newHttpClient().send(HttpRequest.newBuilder(
                    URI.create(c.url() + "/api/v1/node")).build(), HttpResponse.BodyHandlers.ofString());
            assertThat(node.body()).contains("\"gpus\":4").contains("\"version\":\"" + ConsoleServer.version() + "\"");
        }
    }

    @Test
    void theVersionComesFromTheBuild() {
        // Maven filters console.properties with ${project.version}: a literal or an unfiltered placeholder fails here
        String expected = System.getProperty("gpusched.expectedVersion");
        assumeTrue(expected != null, "skipped: run by Maven, whose surefire passes the project's version");
        assertThat(ConsoleServer.version()).isEqualTo(expected).doesNotContain("${");
    }

    @Test
    void anInMemorySchedulerNeedsAStateDirectoryForTheToken() {
        try (SimulatedGpuInventory inv = GpuInventories.simulated("pcie-4xa10");
             GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false).build()) {
            assertThatThrownBy(() -> ConsoleServer.builder().scheduler(s).build())
                    .isInstanceOf(IllegalStateException.class).hasMessageContaining("stateDir(");
            assertThatThrownBy(() -> ConsoleServer.builder().build()).isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("needs a scheduler");
        }
    }

    @Test
    void settingsAreCheckedWhereTheyAreSetAndConflictsAtBuild() {
        try (SimulatedGpuInventory inv = GpuInventories.simulated("pcie-4xa10");
             SimulatedGpuInventory other = GpuInventories.simulated("pcie-4xa10");
             GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false).build()) {
            ConsoleServer.Builder b = ConsoleServer.builder().scheduler(s);
            assertThatThrownBy(() -> b.scheduler(s)).isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("scheduler was already set");
            assertThatThrownBy(() -> b.threads(0)).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("threads must be at least 1, was 0");
            assertThatThrownBy(() -> b.maxBodyBytes(-5)).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("was -5");
            assertThatThrownBy(() -> b.maxSseClients(0)).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("event-stream clients");
            b.threads(4);
            assertThatThrownBy(() -> b.threads(8)).isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("already set");
            assertThatThrownBy(() -> b.listen(InetSocketAddress.createUnresolved("no-such-host.invalid", 1)))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("unresolved");
            assertThatThrownBy(() -> ConsoleServer.builder().scheduler(s).inventory(other).stateDir(dir).build())
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("not the scheduler's");
            assertThatThrownBy(() -> ConsoleServer.builder().scheduler(s).stateDir(dir)
                    .listen(new InetSocketAddress("0.0.0.0", 0)).build())
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("--allow-remote");
            assertThatThrownBy(() -> b.maxHeldRequests(0)).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("max held requests must be at least 1, was 0");
            assertThatThrownBy(() -> ConsoleServer.builder().scheduler(s).stateDir(dir).threads(4).maxHeldRequests(4)
                    .build()).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("under the 4 threads");
            assertThat(Files.exists(dir.resolve(ApiToken.FILE_NAME))).as("nothing written by a refused build")
                    .isFalse();
        }
    }
}
