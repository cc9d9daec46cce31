package io.gpusched.cli.adversarial.review14;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import io.gpusched.cli.GpuschedCommand;
import io.gpusched.client.ServiceClient;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.host.InventorySpec;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review14: "the full list stays in the exception's structured fields". In process a refusal past a few devices says
 * "N more in the refusal's obstacles (GpuAllocationException.obstacles())" and obstacles() has every one. The same
 * refusal from the node service ({@code gpusched serve --socket}, the node's one ledger for every user) reaches a
 * Java client ({@link ServiceClient}) with the same message, pointing at obstacles(), and obstacles() empty: neither
 * the service's answer nor the client's Replies carries them (no "obstacles" anywhere in gpusched-server,
 * gpusched-service, gpusched-client).
 */
@Tag("adversarial")
@Timeout(120)
class RefusalFieldsOverTheServiceTest {
    @TempDir
    Path dir;

    @Test
    void aRefusalFromTheNodeServiceKeepsItsObstaclesForAJavaClient() throws Exception {
        // a 16-GPU node; in process: 12 GPUs held one by one, 16 asked for
        StringBuilder y = new StringBuilder("node: review14-16\n"
                + "defaults: {vendor: NVIDIA, name: NVIDIA A10, memory: 24GiB, compute_capability: \"8.6\"}\n"
                + "devices:\n");
        for (int i = 0; i < 16; i++) {
            y.append(String.format("  - {index: %d, pci_bus_id: \"00000000:%02X:00.0\"}%n", i, i + 16));
        }
        Path node = dir.resolve("node-16.yaml");
        Files.writeString(node, y);
        GpuAllocationException local;
        try (GpuInventory inv = InventorySpec.simulated(node.toString()).open(GpuConfig.defaults());
             GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false).build()) {
            for (int i = 0; i < 12; i++) {
                s.allocate(GpuRequest.builder().count(1).owner("r14").build());
            }
            local = catchThrowableOfType(GpuAllocationException.class,
                    () -> s.allocate(GpuRequest.builder().count(16).owner("r14").build()));
        }
        assertThat(local.obstacles()).as("in process: " + local.getMessage()).hasSize(12);
        assertThat(local.getMessage()).contains("in the refusal's obstacles");

        Path socket = dir.resolve("s.sock");
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-cp", System.getProperty("java.class.path"), GpuschedCommand.class.getName(), "--simulate",
                node.toString(), "--state-dir", dir.resolve("state").toString(), "serve", "--listen", "127.0.0.1:0",
                "--socket", socket.toString()));
        Process service = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(dir.resolve("serve.log")
                .toFile()).start();
        try {
            for (int i = 0; i < 900 && !Files.exists(socket) && service.isAlive(); i++) {
                Thread.sleep(100);
            }
            assertThat(socket).as("the service's socket; it said " + Files.readString(dir.resolve("serve.log")))
                    .exists();
            try (ServiceClient c = ServiceClient.connect(socket)) {
                for (int i = 0; i < 12; i++) {
                    c.allocate(List.of("--gpu=1"));
                }
                GpuAllocationException remote = catchThrowableOfType(GpuAllocationException.class,
                        () -> c.allocate(List.of("--gpu=16")));
                assertThat(remote).as("the service's refusal").isNotNull();
                assertThat(remote.reason()).isEqualTo(local.reason());
                assertThat(remote.getMessage()).contains("in the refusal's obstacles");
                assertThat(remote.obstacles()).as("obstacles() of the refusal whose message says \""
                        + remote.getMessage() + "\"").hasSameSizeAs(local.obstacles());
            }
        } finally {
            service.destroy();
            if (!service.waitFor(30, TimeUnit.SECONDS)) {
                service.destroyForcibly().waitFor();
            }
        }
    }
}
