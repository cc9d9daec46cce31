package io.gpusched.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.networknt.schema.Error;
import com.networknt.schema.Schema;
import com.networknt.schema.SchemaLocation;
import com.networknt.schema.SchemaRegistry;
import com.networknt.schema.dialect.Dialects;
import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationView;
import io.gpusched.core.DeviceView;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.HolderProcess;
import io.gpusched.core.MemorySize;
import io.gpusched.core.host.GpuNode;
import io.gpusched.server.ConsoleServer;
import io.gpusched.yarn.YarnContainerGpus;
import java.io.InputStream;
import java.lang.reflect.Constructor;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.RecordComponent;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * One JSON shape of an allocation and of a device, written down as the OpenAPI document's components
 * {@code Allocation} and {@code Device} (the document the console serves), and every producer's output validated
 * against them with an independent JSON Schema validator (networknt, OpenAPI 3.0 dialect): the command's
 * {@code status --json}, {@code allocate --json}, {@code list --json} and {@code env --json} (the real picocli command,
 * in process), the console's {@code /api/v1/allocations}, {@code /api/v1/allocations/{id}} and {@code /api/v1/devices},
 * and the event stream's {@code state} and {@code delta} events. Each object's names are the schema's, plus only the
 * earlier release's names README says are still written there, each equal to its current field.
 */
class AllocationSchemaTest {
    static final String OPENAPI = "io/gpusched/server/web/openapi.json";
    static final String CID = "container_1700000000000_0001_01_000002";
    private static final ObjectMapper JSON = new ObjectMapper();

    private static JsonNode document;
    private static Schema allocationSchema;
    private static Schema deviceSchema;

    @TempDir
    Path state;

    @BeforeAll
    static void loadTheServedDocument() throws Exception {
        try (InputStream in = ConsoleServer.class.getClassLoader().getResourceAsStream(OPENAPI)) {
            assertThat(in).as(OPENAPI + " on the class path").isNotNull();
            document = JSON.readTree(in);
        }
        assertThat(document.path("openapi").asText()).startsWith("3.0");
        SchemaRegistry registry = SchemaRegistry.withDefaultDialect(Dialects.getOpenApi30());
        allocationSchema = registry.getSchema(SchemaLocation.of("classpath:" + OPENAPI
                + "#/components/schemas/Allocation"));
        deviceSchema = registry.getSchema(SchemaLocation.of("classpath:" + OPENAPI + "#/components/schemas/Device"));
    }

    static JsonNode component(String name) {
        return document.path("components").path("schemas").path(name);
    }

    static void valid(Schema schema, JsonNode value, String what) {
        List<Error> errors = schema.validate(value);
        assertThat(errors).as(what + " against the schema: " + value).isEmpty();
    }

    /** The fields of the console's and the service's allocations (which bound owners, job ids and labels) alone. */
    static final Set<String> BOUNDED = Set.of("truncatedFields", "labelsOmitted");

    /** An allocation the console answers with: the schema's shape with both {@link #BOUNDED} fields, nothing cut. */
    static void consoleAllocation(JsonNode a, String what) {
        allocation(a, what, Set.of());
        assertThat(names(a)).as(what + ": says what was cut").containsAll(BOUNDED);
        assertThat(a.get("truncatedFields").isArray() && a.get("truncatedFields").isEmpty()).as(what).isTrue();
        assertThat(a.get("labelsOmitted").asInt(-1)).as(what).isZero();
    }

    /**
     * The Allocation object's names: the schema's (the {@link #BOUNDED} ones where the console answers), plus exactly
     * {@code extras} (all present), no others.
     */
    static void allocation(JsonNode a, String what, Set<String> extras) {
        valid(allocationSchema, a, what);
        Set<String> names = names(a);
        Set<String> schema = names(component("Allocation").path("properties"));
        Set<String> always = new TreeSet<>(schema);
        always.removeAll(BOUNDED);
        assertThat(names).as(what + ": the schema's names and " + extras).containsAll(always).containsAll(extras);
        assertThat(names.containsAll(BOUNDED) || Collections.disjoint(names, BOUNDED))
                .as(what + ": " + BOUNDED + " come together").isTrue();
        names.removeAll(schema);
        assertThat(names).as(what + ": names beyond the schema").isEqualTo(extras);
        if (extras.contains("deviceIndices")) {
            assertThat(a.get("deviceIndices")).as(what + ": deviceIndices is devices").isEqualTo(a.get("devices"));
            assertThat(a.get("deviceUuids")).as(what + ": deviceUuids is uuids").isEqualTo(a.get("uuids"));
        }
    }

    /**
     * A device: the schema's names but holdersTotal, plus exactly {@code extras} (holdersTotal among them where the
     * console counts the holders).
     */
    static void device(JsonNode d, String what, Set<String> extras) {
        valid(deviceSchema, d, what);
        Set<String> names = names(d);
        Set<String> always = names(component("Device").path("properties"));
        always.remove("holdersTotal");
        assertThat(names).as(what + ": the schema's names").containsAll(always);
        names.removeAll(always);
        assertThat(names).as(what + ": names beyond those always present").isEqualTo(extras);
        if (extras.contains("holdersTotal")) {
            assertThat(d.get("holdersTotal").asInt()).as(what + ": holdersTotal").isEqualTo(d.get("holders").size());
        }
        for (JsonNode h : d.get("holders")) {
            if (extras.contains("holdersTotal")) {
                consoleAllocation(h, what + "'s holder");
            } else {
                allocation(h, what + "'s holder", Set.of());
            }
        }
        if (extras.contains("heldBy")) {
            List<String> shared = new ArrayList<>();
            String exclusive = null;
            for (JsonNode h : d.get("holders")) {
                if (h.get("sharing").asText().equals("SHARED")) {
                    shared.add(h.get("id").asText());
                } else {
                    exclusive = h.get("id").asText();
                }
            }
            assertThat(d.get("heldBy").isNull() ? null : d.get("heldBy").asText()).as(what + ": heldBy")
                    .isEqualTo(exclusive);
            List<String> sharedBy = new ArrayList<>();
            d.get("sharedBy").forEach(x -> sharedBy.add(x.asText()));
            assertThat(sharedBy).as(what + ": sharedBy").isEqualTo(shared);
        }
    }

    static Set<String> names(JsonNode o) {
        Set<String> s = new TreeSet<>();
        o.fieldNames().forEachRemaining(s::add);
        return s;
    }

    static JsonNode json(String out) throws Exception {
        return JSON.readTree(out);
    }

    /** The node as the producers will show it: leased, held, labelled, shared and YARN allocations. */
    private List<Allocation> allocationsOfEveryKind() {
        try (GpuNode node = GpuNode.builder().inventory("simulated:dgx1-v100").stateDir(state).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).build()) {
            List<Allocation> made = new ArrayList<>();
            made.add(node.scheduler().allocate(GpuRequest.builder().deviceIndices(0, 1).owner("alice").jobId("train-7")
                    .label("team", "vision").maxDuration(Duration.ofHours(2)).holder(HolderProcess.current())
                    .build()));
            made.add(node.scheduler().allocate(GpuRequest.builder().deviceIndices(4)
                    .shared(MemorySize.ofGibibytes(4)).build()));
            made.add(node.scheduler().allocate(GpuRequest.builder().deviceIndices(4)
                    .shared(MemorySize.ofGibibytes(2)).owner("bob").build()));
            made.add(node.scheduler().allocate(GpuRequest.builder().deviceIndices(6, 7).owner("yarn").jobId(CID)
                    .label(YarnContainerGpus.LABEL, CID).build()));
            return made;
        }
    }

    @Test
    void everyCommandsJsonIsTheSchemasShape() throws Exception {
        allocationsOfEveryKind();
        CliRunner cli = new CliRunner(state);

        CliRunner.Result allocate = cli.run("--simulate", "dgx1-v100", "--json", "allocate", "--gpu=1");
        assertThat(allocate.exit()).as(allocate.err()).isZero();
        allocation(json(allocate.out()), "allocate --json", Set.of("environment"));

        CliRunner.Result status = cli.run("--simulate", "dgx1-v100", "--json", "status");
        assertThat(status.exit()).as(status.err()).isZero();
        JsonNode st = json(status.out());
        assertThat(st.get("allocations")).as("status lists the five allocations").hasSize(5);
        for (JsonNode a : st.get("allocations")) {
            allocation(a, "status --json's allocation", AllocationView.OLD_NAMES.keySet());
        }
        assertThat(st.get("devices")).hasSize(8);
        for (JsonNode d : st.get("devices")) {
            device(d, "status --json's device", Set.of("heldBy", "sharedBy"));
        }

        CliRunner.Result list = cli.run("--simulate", "dgx1-v100", "--json", "list");
        assertThat(list.exit()).as(list.err()).isZero();
        JsonNode devices = json(list.out());
        assertThat(devices).hasSize(8);
        for (JsonNode d : devices) {
            device(d, "list --json's device", Set.of("heldBy", "sharedBy"));
        }

        CliRunner.Result env = cli.run("--simulate", "dgx1-v100", "--json", "env", "--container", CID);
        assertThat(env.exit()).as(env.err()).isZero();
        JsonNode e = json(env.out());
        Set<String> envExtras = new HashSet<>(Set.of("container", "environment", "allocation", "gpus", "env"));
        envExtras.addAll(AllocationView.OLD_NAMES.keySet());
        allocation(e, "env --json", envExtras);
        assertThat(e.get("allocation")).as("env --json: allocation is the id").isEqualTo(e.get("id"));
        assertThat(e.get("gpus")).as("env --json: gpus is devices").isEqualTo(e.get("devices"));
        assertThat(e.get("env")).as("env --json: env is environment").isEqualTo(e.get("environment"));
        assertThat(e.get("devices").toString()).isEqualTo("[6,7]");
    }

    @Test
    void theConsolesAnswersAndEventsAreTheSchemasShape() throws Exception {
        List<Allocation> made = allocationsOfEveryKind();
        try (GpuNode node = GpuNode.builder().inventory("simulated:dgx1-v100").stateDir(state).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).build();
             ConsoleServer console = ConsoleServer.builder().scheduler(node.scheduler())
                     .inventory(node.inventory()).stateDir(state)
                     .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0))
                     .refresh(node.scheduler()::refresh).build().start()) {
            HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(30)).build();
            JsonNode all = get(http, console, "/api/v1/allocations");
            assertThat(all).hasSize(made.size());
            for (JsonNode a : all) {
                consoleAllocation(a, "GET /api/v1/allocations");
            }
            consoleAllocation(get(http, console, "/api/v1/allocations/" + made.get(0).id()),
                    "GET /api/v1/allocations/{id}");
            JsonNode devices = get(http, console, "/api/v1/devices");
            assertThat(devices).hasSize(8);
            for (JsonNode d : devices) {
                device(d, "GET /api/v1/devices", Set.of("holdersTotal"));
            }

            HttpResponse<Stream<String>> events = http.send(HttpRequest.newBuilder(
                    URI.create(console.url() + "/api/v1/events")).timeout(Duration.ofSeconds(60)).build(),
                    HttpResponse.BodyHandlers.ofLines());
            assertThat(events.statusCode()).isEqualTo(200);
            Iterator<String> lines = events.body().iterator();
            JsonNode stateEvent = nextEvent(lines, "state");
            assertThat(stateEvent.get("allocations")).hasSize(made.size());
            for (JsonNode a : stateEvent.get("allocations")) {
                consoleAllocation(a, "the state event's allocation");
            }
            Set<String> withoutHolders = names(component("Device").path("properties"));
            withoutHolders.removeAll(Set.of("holders", "holdersTotal"));
            for (JsonNode d : stateEvent.get("devices")) {
                // each allocation is sent once, in the allocations: the state event's devices have no holders
                assertThat(names(d)).as("the state event's device: Device without holders").isEqualTo(withoutHolders);
                valid(deviceSchema, d, "the state event's device, as sent");
            }

            Allocation later = node.scheduler().allocate(GpuRequest.builder().deviceIndices(5).owner("carol")
                    .maxDuration(Duration.ofMinutes(30)).build());
            JsonNode delta = nextEvent(lines, "delta");
            List<String> upserted = new ArrayList<>();
            for (JsonNode a : delta.get("allocations").get("upsert")) {
                consoleAllocation(a, "the delta event's allocation");
                upserted.add(a.get("id").asText());
            }
            assertThat(upserted).as("the delta carries the new allocation").contains(later.id());
            Set<String> deviceNames = names(component("Device").path("properties"));
            deviceNames.removeAll(Set.of("holders", "holdersTotal"));
            for (JsonNode d : delta.get("devices")) {
                assertThat(names(d)).as("the delta event's device: Device without holders").isEqualTo(deviceNames);
                valid(deviceSchema, d, "the delta event's device, as sent");
            }
            events.body().close();
        }
    }

    private static JsonNode get(HttpClient http, ConsoleServer console, String path) throws Exception {
        HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create(console.url() + path))
                .timeout(Duration.ofSeconds(60)).build(), HttpResponse.BodyHandlers.ofString());
        assertThat(r.statusCode()).as(path + ": " + r.body()).isEqualTo(200);
        return json(r.body());
    }

    /** @return the data of the next event named {@code name} (other events are skipped) */
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
                    return json(data.toString());
                }
                event = null;
                data.setLength(0);
            }
        }
        throw new AssertionError("no " + name + " event");
    }

    /** The validator and the schema are not a test that cannot fail: broken objects are refused. */
    @Test
    void theSchemaRefusesWhatIsNotTheShape() {
        Map<String, Object> good = sampleAllocation().toMap();
        valid(allocationSchema, JSON.valueToTree(good), "a complete allocation");
        Map<String, Object> nulls = new LinkedHashMap<>(good);
        nulls.put("owner", null);
        nulls.put("holderPid", null);
        valid(allocationSchema, JSON.valueToTree(nulls), "nullable fields null");
        List<Map<String, Object>> broken = new ArrayList<>();
        for (String k : List.of("id", "devices", "placement", "expired")) {
            Map<String, Object> m = new LinkedHashMap<>(good);
            m.remove(k);
            broken.add(m);
        }
        Map<String, Object> nullId = new LinkedHashMap<>(good);
        nullId.put("id", null);
        broken.add(nullId);
        Map<String, Object> textDevices = new LinkedHashMap<>(good);
        textDevices.put("devices", "0,1");
        broken.add(textDevices);
        Map<String, Object> badSharing = new LinkedHashMap<>(good);
        badSharing.put("sharing", "BOTH");
        broken.add(badSharing);
        for (Map<String, Object> m : broken) {
            assertThat(allocationSchema.validate(JSON.valueToTree(m))).as("refused: " + m).isNotEmpty();
        }
        Map<String, Object> device = sampleDevice().toMap();
        valid(deviceSchema, JSON.valueToTree(device), "a complete device");
        Map<String, Object> badHolder = new LinkedHashMap<>(device);
        Map<String, Object> holder = new LinkedHashMap<>(good);
        holder.remove("uuids");
        badHolder.put("holders", List.of(holder));
        assertThat(deviceSchema.validate(JSON.valueToTree(badHolder))).as("a holder is checked as an Allocation")
                .isNotEmpty();
    }

    /**
     * The components describe the records exactly: the same names as {@code toMap()}, all required; each type the
     * Java type's; nullable exactly where the record takes null (a non-nullable field refused null by the record).
     */
    @Test
    void theComponentsDescribeTheViewsExactly() throws Exception {
        describesExactly("Allocation", sampleAllocation(), sampleAllocation().toMap().keySet(), BOUNDED, Set.of());
        // holders: always in GET /api/v1/devices, left out of the event stream's devices (each allocation is sent
        // once there, in the allocations), so the one component says it may be absent
        describesExactly("Device", sampleDevice(), sampleDevice().toMap().keySet(), Set.of("holdersTotal"),
                Set.of("holders"));
    }

    private static void describesExactly(String name, Record sample, Set<String> mapKeys, Set<String> consoleOnly,
            Set<String> notEverywhere) throws Exception {
        JsonNode c = component(name);
        Set<String> props = names(c.path("properties"));
        props.removeAll(consoleOnly);
        Set<String> required = new TreeSet<>();
        c.path("required").forEach(r -> required.add(r.asText()));
        RecordComponent[] rc = sample.getClass().getRecordComponents();
        Set<String> components = new TreeSet<>();
        for (RecordComponent r : rc) {
            components.add(r.getName());
        }
        assertThat(props).as(name + "'s properties are the record's").isEqualTo(components)
                .isEqualTo(new TreeSet<>(mapKeys));
        Set<String> everywhere = new TreeSet<>(components);
        everywhere.removeAll(notEverywhere);
        assertThat(required).as(name + ": every field toMap() writes is required, but those some producers leave out")
                .isEqualTo(everywhere);
        Constructor<?> ctor = sample.getClass().getDeclaredConstructor(
                Stream.of(rc).map(RecordComponent::getType).toArray(Class<?>[]::new));
        for (int i = 0; i < rc.length; i++) {
            JsonNode p = c.path("properties").path(rc[i].getName());
            assertThat(p.path("type").asText()).as(name + "." + rc[i].getName() + "'s type")
                    .isEqualTo(schemaType(rc[i].getType()));
            boolean acceptsNull = false;
            if (!rc[i].getType().isPrimitive()) {
                Object[] args = new Object[rc.length];
                for (int j = 0; j < rc.length; j++) {
                    args[j] = j == i ? null : rc[j].getAccessor().invoke(sample);
                }
                try {
                    ctor.newInstance(args);
                    acceptsNull = true;
                } catch (InvocationTargetException e) {
                    assertThat(e.getCause()).isInstanceOf(NullPointerException.class);
                }
            }
            assertThat(p.path("nullable").asBoolean(false)).as(name + "." + rc[i].getName() + " nullable")
                    .isEqualTo(acceptsNull);
        }
    }

    private static String schemaType(Class<?> t) {
        if (t == String.class) {
            return "string";
        } else if (t == Long.class || t == Integer.class || t == int.class || t == long.class) {
            return "integer";
        } else if (t == Double.class || t == double.class) {
            return "number";
        } else if (t == boolean.class || t == Boolean.class) {
            return "boolean";
        } else if (List.class.isAssignableFrom(t)) {
            return "array";
        } else if (Map.class.isAssignableFrom(t)) {
            return "object";
        }
        throw new AssertionError("no schema type for " + t);
    }

    static AllocationView sampleAllocation() {
        return new AllocationView("a-1f2e", "alice", 1001L, "train-7", List.of(0, 1), List.of("GPU-a", "GPU-b"),
                "SHARED", 1L << 30, "2026-11-22T10:00:00Z", "2026-11-22T12:00:00Z", false, 4242L,
                Map.of("team", "vision"), "proven optimal");
    }

    static DeviceView sampleDevice() {
        return new DeviceView(0, "GPU-a", "Tesla V100-SXM2-16GB", "NVIDIA", "00000000:06:00.0", 16L << 30, 1L << 30,
                12.5, 40.0, 55.0, "UNHEALTHY", "XID 79", "DRAINING", "released", 0L, List.of(sampleAllocation()));
    }
}
