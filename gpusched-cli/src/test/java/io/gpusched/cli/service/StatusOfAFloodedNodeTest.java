package io.gpusched.cli.service;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.cli.GpuschedCommand;
import io.gpusched.client.ServiceClient;
import io.gpusched.core.AllocationView;
import io.gpusched.core.DeviceView;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.GpuScheduler;
import io.gpusched.server.ConsoleServer;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceRoutes;
import io.gpusched.testing.LedgerReader;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 36 through the node service: on a DGX-1 full of shared allocations (8 GPUs x 48) with job ids and labels as
 * long as a view keeps them, the service answers its lists in bounded pages, and the client reads them whole: {@link
 * ServiceClient#allocations()} follows the pages to every live allocation once, {@link ServiceClient#devices()}
 * completes each GPU's cut holder list, and {@code gpusched status} / {@code list} over the socket show them all, as
 * before the lists were paged. What is live is read from the ledger's file ({@link LedgerReader}).
 */
@Timeout(180)
class StatusOfAFloodedNodeTest {
    private static final ObjectMapper M = new ObjectMapper();
    private static final String WIDE = new String(Character.toChars(0x1F600)); // 4 bytes in UTF-8

    record Result(int exit, String out, String err) {
    }

    private static Result gpusched(Path socket, String... args) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        Map<String, String> env = new HashMap<>(System.getenv());
        env.put("GPUSCHED_SOCKET", socket.toString());
        int exit = GpuschedCommand.commandLine(new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8), env).execute(args);
        return new Result(exit, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    @Test
    void statusAndListThroughTheServiceShowEveryAllocationOfAFloodedNode(@TempDir Path dir) throws Exception {
        Path state = Files.createDirectories(dir.resolve("state"));
        Path socket = dir.resolve("run").resolve("gpusched.sock");
        try (GpuScheduler s = GpuScheduler.builder().inventory(GpuInventories.simulated("dgx1-v100")).stateDir(state)
                .auditLogging(false).build();
             NodeService svc = NodeService.builder().scheduler(s).config(GpuConfig.defaults()).stateDir(state)
                     .jobs(null, "this test runs no jobs").build().start()) {
            ServiceRoutes routes = new ServiceRoutes(svc);
            ConsoleServer.Builder b = ConsoleServer.builder().scheduler(s).stateDir(state)
                    .listen(new InetSocketAddress("127.0.0.1", 0)).unixSocket(socket);
            routes.routes().forEach(b::route);
            try (ConsoleServer server = b.build()) {
                routes.console(server::serveOwn);
                server.start();
                String bobs = s.allocate(GpuRequests.fromCliFlags(List.of("--devices=7", "--shared=32MiB"))
                        .withOwner("bob", 2002)).id();
                for (int n = 0; n < 8 * 48 - 1; n++) {
                    List<String> f = new ArrayList<>(List.of("--devices=" + (n / 48 % 8), "--shared=32MiB",
                            "--job=" + WIDE.repeat(63) + n));
                    for (int l = 0; l < 32; l++) { // as many as a view keeps, each as long as a view keeps it
                        f.add("--label=" + WIDE.repeat(61) + l + "=" + WIDE.repeat(64));
                    }
                    s.allocate(GpuRequests.fromCliFlags(f).withOwner("alice", 2001));
                }
                LedgerReader ledger = LedgerReader.read(state);
                assertThat(ledger.live).hasSize(384).containsKey(bobs);

                try (ServiceClient c = ServiceClient.connect(socket)) {
                    List<String> ids = c.allocations().stream().map(AllocationView::id).toList();
                    assertThat(ids).as("every live allocation, each once").doesNotHaveDuplicates()
                            .containsExactlyInAnyOrderElementsOf(ledger.live.keySet());
                    List<DeviceView> devices = c.devices();
                    assertThat(devices).hasSize(8);
                    for (DeviceView d : devices) {
                        List<String> held = ledger.live.values().stream().filter(a -> a.uuids().contains(d.uuid()))
                                .map(LedgerReader.Live::id).toList();
                        assertThat(d.holders()).as("GPU %d's holders, whole", d.index())
                                .extracting(AllocationView::id).containsExactlyInAnyOrderElementsOf(held);
                        assertThat(d.sharedHolders()).isEqualTo(48);
                    }
                }

                Result st = gpusched(socket, "--json", "status");
                assertThat(st.exit()).as(st.err()).isZero();
                JsonNode json = M.readTree(st.out());
                List<String> shown = new ArrayList<>();
                json.get("allocations").forEach(a -> shown.add(a.get("id").asText()));
                assertThat(shown).doesNotHaveDuplicates().containsExactlyInAnyOrderElementsOf(ledger.live.keySet());
                json.get("devices").forEach(d -> assertThat(d.get("sharedBy")).as("GPU %s sharedBy", d.get("index"))
                        .hasSize(48));
                Result list = gpusched(socket, "list");
                assertThat(list.exit()).as(list.err()).isZero();
                assertThat(list.out().split("shared x48", -1)).as(list.out()).hasSize(9);
            }
        }
    }
}
