package io.gpusched.cli.service;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.cli.GpuschedCommand;
import io.gpusched.client.Identity;
import io.gpusched.client.ServiceClient;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.server.ConsoleServer;
import io.gpusched.testing.LedgerReader;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The command over the real node socket (gpusched-server's Jetty transport on a Unix socket, callers by their peer
 * credentials), as root: the routes the console serves there (node, devices, allocations, an allocation's
 * environment, the event stream, whoami), read and changed through {@link ServiceClient} with the answers Jetty frames
 * (chunked, event streams, its error pages). What the service holds is checked from its ledger file.
 */
@Timeout(120)
class OverTheNodeSocketTest {
    private static final ObjectMapper M = new ObjectMapper();

    @TempDir
    Path dir;
    GpuScheduler scheduler;
    ConsoleServer server;
    Path socket;

    record Result(int exit, String out, String err) {
    }

    @BeforeEach
    void setUp() throws Exception {
        Path state = Files.createDirectories(dir.resolve("state"));
        scheduler = GpuScheduler.builder().inventory(GpuInventories.simulated("dgx1-v100")).stateDir(state)
                .auditLogging(false).build();
        socket = dir.resolve("run").resolve("gpusched.sock");
        server = ConsoleServer.builder().scheduler(scheduler).stateDir(state).listen(new InetSocketAddress(
                "127.0.0.1", 0)).unixSocket(socket).build().start();
    }

    @AfterEach
    void tearDown() {
        if (server != null) {
            server.close();
        }
        scheduler.close();
    }

    private Result gpusched(String... args) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        Map<String, String> env = new HashMap<>(System.getenv());
        env.put("GPUSCHED_SOCKET", socket.toString());
        int exit = GpuschedCommand.commandLine(new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8), env).execute(args);
        return new Result(exit, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    @Test
    void theCommandIsServedOverTheNodeSocket() throws Exception {
        try (ServiceClient c = ServiceClient.connect(socket)) {
            Identity me = c.whoami();
            assertThat(me.uid()).isEqualTo(Long.parseLong(Files.readAllLines(Path.of("/proc/self/status")).stream()
                    .filter(l -> l.startsWith("Uid:")).findFirst().orElseThrow().split("\\s+")[1]));
        }
        Result a = gpusched("--json", "allocate", "--gpu=2");
        if (a.exit() != 0) {
            // an ordinary user: the console's own changes are for admins on the socket (the service's come later)
            assertThat(a.err()).contains("admins");
            return;
        }
        JsonNode alloc = M.readTree(a.out());
        String id = alloc.get("id").asText();
        assertThat(alloc.get("environment").get("CUDA_VISIBLE_DEVICES").asText()).startsWith("GPU-");
        assertThat(LedgerReader.read(dir.resolve("state")).live).containsOnlyKeys(id);

        JsonNode st = M.readTree(gpusched("--json", "status").out());
        assertThat(st.get("allocations").get(0).get("id").asText()).isEqualTo(id);
        assertThat(st.get("devices")).hasSize(8);
        assertThat(gpusched("list").out()).contains(id);
        assertThat(gpusched("watch", "--count", "2", "--no-ansi").out().split("gpusched watch - simulated:dgx1-v100",
                -1)).hasSize(3);
        Result docker = gpusched("allocate", "--gpu=1", "--format", "docker");
        assertThat(docker.exit()).as(docker.err()).isZero();
        assertThat(docker.out()).startsWith("--device=/dev/nvidia");

        Allocation yarn = scheduler.allocate(GpuRequest.builder().count(1).owner("yarn").label("yarn.container",
                "container_1700000000000_0001_01_000002").build());
        Result env = gpusched("env", "--container", "container_1700000000000_0001_01_000002");
        assertThat(env.out()).contains("export CUDA_VISIBLE_DEVICES='" + yarn.deviceUuids().get(0) + "'");

        Result big = gpusched("allocate", "--gpu=9");
        assertThat(big.exit()).isEqualTo(2);
        assertThat(big.err()).startsWith("gpusched: NODE_TOO_SMALL: ");
        assertThat(gpusched("release", id).out()).isEqualTo("released " + id + "\n");
        assertThat(LedgerReader.read(dir.resolve("state")).live).doesNotContainKey(id).hasSize(2);
    }
}
