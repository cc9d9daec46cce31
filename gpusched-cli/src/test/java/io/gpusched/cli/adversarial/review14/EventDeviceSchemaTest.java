package io.gpusched.cli.adversarial.review14;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.networknt.schema.Error;
import com.networknt.schema.Schema;
import com.networknt.schema.SchemaLocation;
import com.networknt.schema.SchemaRegistry;
import com.networknt.schema.dialect.Dialects;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.host.GpuNode;
import io.gpusched.server.ConsoleServer;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review14: item 4 of the issue, "every producer's output validates against" the schema, the server-sent events
 * among the producers. The event stream's {@code state} event sends each device without {@code holders}, which the
 * served {@code Device} component lists as required; the OpenAPI document has no other component for an event's
 * device (GET /api/v1/events has no schema at all). AllocationSchemaTest validates the event's devices only after
 * adding {@code "holders": []} to each (AllocationSchemaTest.java:271-272 and 288-289): the output as sent is never
 * validated. Here it is, as sent.
 */
@Tag("adversarial")
@Timeout(120)
class EventDeviceSchemaTest {
    static final String OPENAPI = "io/gpusched/server/web/openapi.json";
    private static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path state;

    @Test
    void theStateEventsDevicesAsSentValidateAgainstTheServedDeviceSchema() throws Exception {
        SchemaRegistry registry = SchemaRegistry.withDefaultDialect(Dialects.getOpenApi30());
        Schema device = registry.getSchema(SchemaLocation.of("classpath:" + OPENAPI + "#/components/schemas/Device"));
        try (GpuNode node = GpuNode.builder().inventory("simulated:dgx1-v100").stateDir(state).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).build();
             ConsoleServer console = ConsoleServer.builder().scheduler(node.scheduler())
                     .inventory(node.inventory()).stateDir(state)
                     .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0))
                     .refresh(node.scheduler()::refresh).build().start()) {
            node.scheduler().allocate(GpuRequest.builder().deviceIndices(0).owner("alice").build());
            HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(30)).build();
            HttpResponse<Stream<String>> events = http.send(HttpRequest.newBuilder(
                    URI.create(console.url() + "/api/v1/events")).timeout(Duration.ofSeconds(60)).build(),
                    HttpResponse.BodyHandlers.ofLines());
            assertThat(events.statusCode()).isEqualTo(200);
            JsonNode stateEvent = nextEvent(events.body().iterator(), "state");
            events.body().close();
            List<String> problems = new ArrayList<>();
            for (JsonNode d : stateEvent.get("devices")) {
                for (Error e : device.validate(d)) {
                    problems.add("device " + d.get("index") + ": " + e.getMessage());
                }
            }
            assertThat(problems).as("the state event's devices, as sent, against components/schemas/Device")
                    .isEmpty();
        }
    }

    private static JsonNode nextEvent(Iterator<String> lines, String name) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        String event = null;
        StringBuilder data = new StringBuilder();
        while (System.nanoTime() < deadline && lines.hasNext()) {
            String line = lines.next();
            if (line.startsWith("event:")) {
                event = line.substring(6).trim();
            } else if (line.startsWith("data:")) {
                data.append(line.substring(5).trim());
            } else if (line.isEmpty()) {
                if (name.equals(event)) {
                    return JSON.readTree(data.toString());
                }
                event = null;
                data.setLength(0);
            }
        }
        throw new AssertionError("no " + name + " event");
    }
}
