package io.gpusched.server;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.SimulatedGpuInventory;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The OpenAPI document the server serves against what it routes: the same set of paths both ways, and every
 * documented path and method answered over HTTP with a documented status (none with "no such resource").
 */
class OpenApiMatchesRoutesTest {

    static String[] request(ConsoleServer c, String method, String path, String token, String body)
            throws Exception {
        try (Socket s = new Socket(c.address().getAddress(), c.address().getPort())) {
            s.setSoTimeout(30_000);
            byte[] b = body == null ? new byte[0] : body.getBytes(StandardCharsets.UTF_8);
            String head = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                    + (token == null ? "" : "Authorization: Bearer " + token + "\r\n")
                    + (body == null ? "" : "Content-Type: application/json\r\nContent-Length: " + b.length + "\r\n")
                    + "\r\n";
            s.getOutputStream().write(head.getBytes(StandardCharsets.ISO_8859_1));
            s.getOutputStream().write(b);
            s.getOutputStream().flush();
            InputStream in = s.getInputStream();
            if (path.endsWith("/events")) { // an endless stream: the status line and headers are enough
                StringBuilder sb = new StringBuilder();
                while (!sb.toString().contains("\r\n\r\n")) {
                    int ch = in.read();
                    if (ch < 0) {
                        break;
                    }
                    sb.append((char) ch);
                }
                return new String[]{sb.substring(9, 12), ""};
            }
            String all = new String(in.readAllBytes(), StandardCharsets.UTF_8);
            return new String[]{all.substring(9, 12), all.substring(all.indexOf("\r\n\r\n") + 4)};
        }
    }

    @Test
    void everyServedPathIsDocumentedAndEveryDocumentedOneAnswers(@TempDir Path state) throws Exception {
        SimulatedGpuInventory inv = GpuInventories.simulated("pcie-4xa10");
        try (GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false).build();
             ConsoleServer c = ConsoleServer.builder().scheduler(s).inventory(inv).stateDir(state)
                     .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).build().start()) {
            String[] doc = request(c, "GET", "/api/v1/openapi.json", null, null);
            assertThat(doc[0]).isEqualTo("200");
            JsonNode api = new ObjectMapper().readTree(doc[1]);
            Set<String> documented = new TreeSet<>();
            api.get("paths").fieldNames().forEachRemaining(documented::add);
            Set<String> served = new TreeSet<>();
            for (Map.Entry<String, Boolean> e : c.servedPaths().entrySet()) {
                if (e.getValue()) {
                    served.add(e.getKey());
                }
            }
            assertThat(documented).as("documented = served").isEqualTo(served);

            // each documented operation, over HTTP, answers with one of its documented statuses
            String id = s.allocate(GpuRequests.fromCliFlags("--gpu=1")).id();
            List<String> checked = new ArrayList<>();
            // every operation, deletions last (a DELETE of {id} first would leave the others nothing to read)
            List<Map.Entry<String, Map.Entry<String, JsonNode>>> operations = new ArrayList<>();
            for (Iterator<Map.Entry<String, JsonNode>> it = api.get("paths").fields(); it.hasNext();) {
                Map.Entry<String, JsonNode> p = it.next();
                for (Iterator<Map.Entry<String, JsonNode>> ops = p.getValue().fields(); ops.hasNext();) {
                    Map.Entry<String, JsonNode> op = ops.next();
                    if (!op.getKey().equals("parameters")) { // shared by the path's operations, not one
                        operations.add(Map.entry(p.getKey(), op));
                    }
                }
            }
            operations.sort(Comparator.comparing(o -> o.getValue().getKey().equals("delete")));
            for (Map.Entry<String, Map.Entry<String, JsonNode>> o : operations) {
                Map.Entry<String, JsonNode> op = o.getValue();
                String method = op.getKey().toUpperCase(java.util.Locale.ROOT);
                String path = o.getKey().replace("{id}", id);
                String body = method.equals("POST") ? "{\"flags\": [\"--gpu=1\"]}" : null;
                String[] r = request(c, method, path, c.token().value(), body);
                Set<String> statuses = new TreeSet<>();
                op.getValue().get("responses").fieldNames().forEachRemaining(statuses::add);
                assertThat(statuses).as("%s %s answered %s: %s", method, path, r[0], r[1]).contains(r[0]);
                assertThat(r[0]).as("%s %s: %s", method, path, r[1]).startsWith("2");
                checked.add(method + " " + o.getKey());
            }
            assertThat(checked).contains("GET /api/v1/samples", "POST /api/v1/allocations",
                    "DELETE /api/v1/allocations/{id}", "GET /api/v1/events", "GET /metrics");
            // and a path that is not documented is not served
            assertThat(request(c, "GET", "/api/v1/nothing", null, null)[0]).isEqualTo("404");
        }
    }
}
