package io.gpusched.client;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.AccessDeniedException;
import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationView;
import io.gpusched.core.DeviceView;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.LedgerException;
import io.gpusched.testing.UnixHttpStandIn;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link ServiceClient} against a stand-in of the node service on a real Unix socket, answering with the contract's
 * shapes (docs/SERVICE.md): the allocations and devices are a real simulated scheduler's, written by gpu-core's views;
 * each request the client sends is checked (method, path, body) and each answer read back into the library's values
 * and typed errors.
 */
class ServiceClientTest {
    private static final ObjectMapper M = new ObjectMapper();

    @TempDir
    Path dir;
    GpuScheduler scheduler;
    UnixHttpStandIn service;
    ServiceClient client;

    @BeforeEach
    void setUp() {
        scheduler = GpuScheduler.builder().inventory(GpuInventories.simulated("dgx1-v100")).auditLogging(false)
                .build();
    }

    @AfterEach
    void tearDown() throws Exception {
        if (client != null) {
            client.close();
        }
        if (service != null) {
            service.close();
        }
        scheduler.close();
    }

    private void serve(UnixHttpStandIn.Handler h) throws Exception {
        service = new UnixHttpStandIn(dir.resolve("gpusched.sock"), h);
        client = ServiceClient.builder().socket(service.socket()).answerTimeout(Duration.ofSeconds(10)).build();
    }

    private static String json(Object o) throws Exception {
        return M.writeValueAsString(o);
    }

    @Test
    void allocateSendsTheFlagsAndReadsTheAllocationInTheOneShape() throws Exception {
        Allocation a = scheduler.allocate(GpuRequest.builder().count(2).owner("alice").build()
                .withOwner("alice", 1001));
        serve((r, x) -> x.json(201, json(AllocationView.of(a, Instant.now()).toMap())));
        AllocationView v = client.allocate(List.of("--gpu=2", "--lease=2h"));
        assertThat(v).isEqualTo(AllocationView.of(a, Instant.now()));
        assertThat(v.ownerUid()).isEqualTo(1001L);
        UnixHttpStandIn.Request r = service.requests().get(0);
        assertThat(r.method()).isEqualTo("POST");
        assertThat(r.target()).isEqualTo("/api/v1/allocations");
        assertThat(M.readTree(r.body())).isEqualTo(M.readTree("{\"flags\":[\"--gpu=2\",\"--lease=2h\"]}"));
        assertThat(r.headers()).containsEntry("content-type", "application/json").containsEntry("connection", "close");
    }

    @Test
    void aWaitIsSentAndTheAnswerMayComeLaterThanTheAnswerTimeout() throws Exception {
        Allocation a = scheduler.allocate(GpuRequest.builder().count(1).build());
        serve((r, x) -> {
            Thread.sleep(1500); // longer than the answer timeout below: the wait is added to it
            x.json(201, json(AllocationView.of(a, Instant.now()).toMap()));
        });
        client = ServiceClient.builder().socket(service.socket()).answerTimeout(Duration.ofSeconds(1)).build();
        assertThat(client.allocate(List.of("--gpu=1"), Duration.ofMinutes(10)).id()).isEqualTo(a.id());
        assertThat(M.readTree(service.requests().get(0).body()).get("wait").asText()).isEqualTo("600s");
    }

    @Test
    void nodeDevicesAndStatusReadTheConsoleShapes() throws Exception {
        Allocation a = scheduler.allocate(GpuRequest.builder().count(1).owner("bob").build());
        Instant now = Instant.now();
        List<Map<String, Object>> devices = new ArrayList<>();
        DeviceView.of(scheduler.devices(), scheduler.allocations(), now).forEach(d -> devices.add(d.toMap()));
        serve((r, x) -> {
            switch (r.target()) {
                case "/api/v1/node" -> x.json(200, "{\"hostname\":\"n1\",\"backend\":\"simulated:dgx1-v100\","
                        + "\"simulated\":true,\"gpus\":8,\"strategy\":\"topology\",\"stateDir\":\"/var/lib/gpusched\","
                        + "\"eventClients\":0,\"eventClientsDropped\":0,\"version\":\"0.1.0\",\"enabled\":true,"
                        + "\"drainSupported\":false,\"notes\":[\"no drain\"]}");
                case "/api/v1/devices" -> x.json(200, json(devices));
                case "/api/v1/allocations" -> x.json(200, json(List.of(AllocationView.of(a, now).toMap())));
                default -> x.json(404, "{\"status\":404,\"error\":\"no such resource\"}");
            }
        });
        NodeStatus st = client.status();
        assertThat(st.node().backend()).isEqualTo("simulated:dgx1-v100");
        assertThat(st.node().simulated()).isTrue();
        assertThat(st.node().stateDirectory()).contains("/var/lib/gpusched");
        assertThat(st.node().notes()).containsExactly("no drain");
        assertThat(st.devices()).isEqualTo(DeviceView.of(scheduler.devices(), scheduler.allocations(), now));
        assertThat(st.allocations()).extracting(AllocationView::id).containsExactly(a.id());
        DeviceView held = st.devices().get(a.deviceIndices().get(0));
        assertThat(held.exclusiveHolder()).contains(a.id());
    }

    @Test
    void refusalsComeBackAsTheLibrarysTypedExceptions() throws Exception {
        serve((r, x) -> {
            switch (r.method() + " " + r.target()) {
                case "POST /api/v1/allocations" -> x.json(409, "{\"status\":409,\"error\":\"asked for 9 GPUs, 8 are"
                        + " free\",\"reason\":\"INSUFFICIENT_GPUS\"}");
                case "DELETE /api/v1/allocations/a-1" -> x.json(403, "{\"status\":403,\"error\":\"a-1 is alice's;"
                        + " alice, root and group gpuadmin may release it\",\"reason\":\"FORBIDDEN\",\"holder\":"
                        + "\"alice\",\"mayAct\":[\"alice\",\"root\",\"group gpuadmin\"]}");
                case "GET /api/v1/allocations/a-2" -> x.json(404, "{\"status\":404,\"error\":\"no allocation a-2\","
                        + "\"reason\":\"UNKNOWN_ALLOCATION\"}");
                case "POST /api/v1/allocations/a-2/renew" -> x.json(400, "{\"status\":400,\"error\":\"\\\"lease\\\""
                        + " must be a duration\"}");
                case "GET /api/v1/queue" -> x.json(503, "{\"status\":503,\"error\":\"the service is shutting down\","
                        + "\"reason\":\"SHUTTING_DOWN\"}");
                case "GET /api/v1/jobs" -> x.json(500, "{\"status\":500,\"error\":\"the ledger's disk is full\","
                        + "\"reason\":\"NO_SPACE\",\"path\":\"/var/lib/gpusched/ledger\"}");
                case "GET /api/v1/whoami" -> x.answer(502, "text/html", "<h1>Bad gateway</h1>");
                default -> x.json(404, "{\"status\":404,\"error\":\"no such resource\"}");
            }
        });
        assertThatThrownBy(() -> client.allocate(List.of("--gpu=9"))).isInstanceOfSatisfying(
                GpuAllocationException.class, e -> assertThat(e.reason())
                        .isEqualTo(GpuAllocationException.Reason.INSUFFICIENT_GPUS))
                .hasMessage("asked for 9 GPUs, 8 are free");
        assertThatThrownBy(() -> client.release("a-1")).isInstanceOfSatisfying(AccessDeniedException.class, e -> {
            assertThat(e.holder()).contains("alice");
            assertThat(e.mayAct()).containsExactly("alice", "root", "group gpuadmin");
            assertThat(e.action()).isEqualTo("release");
            assertThat(e.subject()).isEqualTo("a-1");
        }).hasMessageContaining("alice, root and group gpuadmin");
        assertThat(client.allocation("a-2")).isEmpty();
        assertThatThrownBy(() -> client.renew("a-2", Duration.ofHours(2)))
                .isExactlyInstanceOf(IllegalArgumentException.class).hasMessageContaining("\"lease\"");
        assertThat(M.readTree(service.requests().stream().filter(r -> r.target().endsWith("/renew")).findFirst()
                .orElseThrow().body()).get("lease").asText()).isEqualTo("7200s");
        assertThatThrownBy(() -> client.queue()).isInstanceOfSatisfying(NodeServiceException.class, e -> {
            assertThat(e.kind()).isEqualTo(NodeServiceException.Kind.REFUSED);
            assertThat(e.reason()).isEqualTo("SHUTTING_DOWN");
            assertThat(e.status()).contains(503);
        });
        assertThatThrownBy(() -> client.jobs()).isInstanceOfSatisfying(LedgerException.class, e -> {
            assertThat(e.kind()).isEqualTo(LedgerException.Kind.NO_SPACE);
            assertThat(e.path()).isEqualTo(Path.of("/var/lib/gpusched/ledger"));
        });
        assertThatThrownBy(() -> client.whoami())
                .isInstanceOfSatisfying(NodeServiceException.class, e -> assertThat(e.reason()).isEqualTo("HTTP_502"))
                .hasMessageContaining("502")
                .hasMessageContaining("Bad gateway").hasMessageContaining(service.socket().toString());
    }

    @Test
    void idsArePercentEncodedIntoOnePathSegment() throws Exception {
        serve((r, x) -> x.json(200, "{\"id\":\"x\",\"released\":true}"));
        client.release("a/../b c?d#e");
        assertThat(service.requests().get(0).target()).isEqualTo("/api/v1/allocations/a%2F..%2Fb%20c%3Fd%23e");
    }

    @Test
    void chunkedAnswersAreRead() throws Exception {
        serve((r, x) -> x.chunkedHead(200, "application/json").chunk("{\"uid\":1001,\"gid\":1001,")
                .chunk("\"user\":\"alice\",\"groups\":[\"alice\",\"gpu\"],").chunk("\"admin\":false}").lastChunk());
        assertThat(client.whoami()).isEqualTo(new Identity(1001, 1001, "alice", List.of("alice", "gpu"), false));
    }

    @Test
    void anAttachedJobStreamsItsOutputAndReturnsItsExitCode() throws Exception {
        Allocation a = scheduler.allocate(GpuRequest.builder().count(2).owner("alice").build());
        String job = "{\"id\":\"j-1\",\"owner\":\"alice\",\"uid\":1001,\"state\":\"RUNNING\",\"allocationId\":\""
                + a.id() + "\",\"devices\":" + json(a.deviceIndices()) + ",\"createdAt\":\"2026-11-22T10:00:00Z\","
                + "\"startedAt\":\"2026-11-22T10:00:01Z\",\"endedAt\":null,\"exitCode\":null,\"signal\":null,"
                + "\"detached\":false,\"cgroup\":\"/sys/fs/cgroup/gpusched.jobs/job-" + a.id() + "\",\"argv\":"
                + "[\"python\",\"train.py\"],\"cwd\":\"/home/alice\",\"output\":null}";
        String alloc = json(AllocationView.of(a, Instant.now()).toMap());
        serve((r, x) -> x.chunkedHead(200, "application/x-ndjson")
                .chunk("{\"type\":\"queued\",\"position\":2}\n")
                .chunk("{\"type\":\"started\",\"job\":" + job + ",\"allocation\":" + alloc + "}\n")
                .chunk("{\"type\":\"stdout\",\"data\":\"" + b64("epoch 1\n") + "\"}\n{\"type\":\"stderr\","
                        + "\"data\":\"" + b64("warn\n") + "\"}\n")
                .chunk("{\"type\":\"future-event\",\"x\":1}\n")
                .chunk("{\"type\":\"stdout\",\"data\":\"" + b64("epoch 2\n") + "\"}\n{\"type\":\"exit\",\"code\":"
                        + "137,\"signal\":\"KILL\"}\n")
                .lastChunk());
        List<String> seen = new ArrayList<>();
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        JobExit exit = client.run(new JobSpec(List.of("--gpu=2"), Optional.of(">=12.1"), List.of("python",
                "train.py"), Map.of("HOME", "/home/alice"), "/home/alice", Optional.of(Duration.ofMinutes(5))),
                new JobListener() {
                    @Override
                    public void queued(int position) {
                        seen.add("queued " + position);
                    }

                    @Override
                    public void started(JobView j, AllocationView allocation) {
                        seen.add("started " + j.id() + " " + allocation.id() + " " + j.cgroup());
                    }

                    @Override
                    public void stdout(byte[] data) {
                        out.writeBytes(data);
                    }

                    @Override
                    public void stderr(byte[] data) {
                        seen.add("stderr " + new String(data, StandardCharsets.UTF_8).strip());
                    }
                });
        assertThat(exit).isEqualTo(new JobExit(137, Optional.of("KILL")));
        assertThat(seen).containsExactly("queued 2", "started j-1 " + a.id() + " /sys/fs/cgroup/gpusched.jobs/job-"
                + a.id(), "stderr warn");
        assertThat(out.toString(StandardCharsets.UTF_8)).isEqualTo("epoch 1\nepoch 2\n");
        JsonNode body = M.readTree(service.requests().get(0).body());
        assertThat(body.get("detach").asBoolean()).isFalse();
        assertThat(body.get("argv").toString()).isEqualTo("[\"python\",\"train.py\"]");
        assertThat(body.get("cwd").asText()).isEqualTo("/home/alice");
        assertThat(body.get("cuda").asText()).isEqualTo(">=12.1");
        assertThat(body.get("wait").asText()).isEqualTo("300s");
        assertThat(body.get("env").get("HOME").asText()).isEqualTo("/home/alice");
    }

    @Test
    void aDetachedJobItsLogsAndACancel() throws Exception {
        String view = "{\"id\":\"j-2\",\"owner\":\"alice\",\"uid\":1001,\"state\":\"RUNNING\",\"allocationId\":"
                + "\"a-9\",\"devices\":[3],\"createdAt\":\"t\",\"startedAt\":\"t\",\"endedAt\":null,\"exitCode\":null,"
                + "\"signal\":null,\"detached\":true,\"cgroup\":null,\"argv\":null,\"cwd\":null,\"output\":"
                + "\"/home/alice/.local/state/gpusched/jobs/j-2.log\"}";
        serve((r, x) -> {
            switch (r.method() + " " + r.target()) {
                case "POST /api/v1/jobs" -> x.json(201, view);
                case "GET /api/v1/jobs/j-2/logs?follow=true" -> x.chunkedHead(200, "text/plain").chunk("line 1\n")
                        .chunk("line 2\n").lastChunk();
                case "DELETE /api/v1/jobs/j-2" -> x.json(200, view.replace("RUNNING", "CANCELLED"));
                case "POST /api/v1/jobs/j-2/signal" -> x.json(200, view);
                case "GET /api/v1/jobs/j-3" -> x.json(404, "{\"status\":404,\"error\":\"no job j-3\",\"reason\":"
                        + "\"UNKNOWN_JOB\"}");
                default -> x.json(404, "{\"status\":404,\"error\":\"no such resource\"}");
            }
        });
        JobSpec spec = new JobSpec(List.of("--gpu=1"), Optional.empty(), List.of("sleep", "60"), Map.of(), "/tmp",
                Optional.empty());
        JobView j = client.submit(spec);
        assertThat(j.detached()).isTrue();
        assertThat(j.argv()).as("hidden from others").isNull();
        assertThat(M.readTree(service.requests().get(0).body()).get("detach").asBoolean()).isTrue();
        ByteArrayOutputStream logs = new ByteArrayOutputStream();
        client.logs("j-2", true, logs);
        assertThat(logs.toString(StandardCharsets.UTF_8)).isEqualTo("line 1\nline 2\n");
        assertThat(client.cancel("j-2").state()).isEqualTo("CANCELLED");
        client.signal("j-2", "USR1");
        assertThat(M.readTree(service.requests().get(3).body()).get("signal").asText()).isEqualTo("USR1");
        assertThat(client.job("j-3")).isEmpty();
    }

    @Test
    void watchFollowsTheEventStreamStateThenTicks() throws Exception {
        Instant now = Instant.now();
        List<Map<String, Object>> devices = new ArrayList<>();
        DeviceView.of(scheduler.devices(), scheduler.allocations(), now).forEach(d -> devices.add(d.toMap()));
        String state = json(Map.of("devices", devices, "allocations", List.of()));
        serve((r, x) -> {
            x.raw("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n\r\n");
            x.raw(": heartbeat\n\nid: 1\nevent: state\ndata: " + state + "\n\n");
            x.raw("id: 2\nevent: audit\ndata: {\"type\":\"ALLOCATED\"}\n\n");
            x.raw("id: 3\nevent: tick\ndata: {\"t\":1,\"points\":[{\"gpu\":2,\"point\":{\"t\":1,\"util\":55.0,"
                    + "\"memUsed\":1024,\"temp\":60.0,\"power\":100.0}}]}\n\n");
            x.raw("id: 4\nevent: tick\ndata: {\"t\":2,\"points\":[]}\n\n");
            Thread.sleep(60_000);
        });
        List<NodeSnapshot> frames = new ArrayList<>();
        client.watch(Duration.ofSeconds(1), s -> {
            frames.add(s);
            return frames.size() < 3;
        });
        assertThat(frames).hasSize(3);
        assertThat(frames.get(0).devices()).hasSize(8);
        assertThat(frames.get(1).devices().get(2).utilizationPercent()).isEqualTo(55.0);
        assertThat(frames.get(1).devices().get(2).memoryUsedBytes()).isEqualTo(1024L);
        assertThat(frames.get(1).devices().get(1)).isEqualTo(frames.get(0).devices().get(1));
        assertThat(service.requests().get(0).target()).isEqualTo("/api/v1/events");
    }

    /** @return the devices as the event stream sends them: gpu-core's device view without holders */
    private List<Map<String, Object>> streamDevices() {
        List<Map<String, Object>> devices = new ArrayList<>();
        for (DeviceView d : DeviceView.of(scheduler.devices(), List.of(), Instant.now())) {
            Map<String, Object> m = new LinkedHashMap<>(d.toMap());
            m.remove("holders");
            devices.add(m);
        }
        return devices;
    }

    private static Map<String, Object> view(Allocation a) {
        return AllocationView.of(a, Instant.now()).toMap();
    }

    /** @return the ids and owners of each GPU's holders in a frame, e.g. {@code {0=[a-1 alice], 1=[]}} */
    private static Map<Integer, List<String>> holders(NodeSnapshot s) {
        Map<Integer, List<String>> out = new TreeMap<>();
        for (DeviceView d : s.devices()) {
            out.put(d.index(), d.holders().stream().map(h -> h.id() + " " + h.owner()).toList());
        }
        return out;
    }

    @Test
    void watchShowsEachGpusHoldersAndAppliesDeltasAsTheyCome() throws Exception {
        Allocation alices = scheduler.allocate(GpuRequest.builder().deviceIndices(0, 1).owner("alice").build());
        Allocation bobs = scheduler.allocate(GpuRequest.builder().deviceIndices(5).owner("bob").build());
        String state = json(Map.of("devices", streamDevices(), "allocations", List.of(view(alices))));
        Map<String, Object> gpu5 = streamDevices().get(5);
        gpu5.put("pool", "DRAINING");
        gpu5.put("poolReason", "drained by root");
        String upsert = json(Map.of("devices", List.of(gpu5), "allocations", Map.of("upsert", List.of(view(bobs)),
                "remove", List.of())));
        String remove = json(Map.of("devices", List.of(), "allocations", Map.of("upsert", List.of(),
                "remove", List.of(alices.id(), "a-never-seen"))));
        serve((r, x) -> {
            x.raw("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n\r\n");
            x.raw("event: state\ndata: " + state + "\n\n");
            x.raw("event: delta\ndata: " + upsert + "\n\n");
            x.raw("event: delta\ndata: " + upsert + "\n\n"); // applied twice: the same state
            x.raw("event: tick\ndata: {\"t\":1,\"points\":[{\"gpu\":5,\"point\":{\"util\":42.0}}]}\n\n");
            x.raw("event: delta\ndata: " + remove + "\n\n");
            Thread.sleep(60_000);
        });
        List<NodeSnapshot> frames = new ArrayList<>();
        client.watch(Duration.ofSeconds(1), f -> {
            frames.add(f);
            return frames.size() < 5;
        });
        assertThat(frames).hasSize(5);
        assertThat(holders(frames.get(0))).containsEntry(0, List.of(alices.id() + " alice"))
                .containsEntry(1, List.of(alices.id() + " alice")).containsEntry(5, List.of());
        assertThat(frames.get(0).devices().get(0).exclusiveHolder()).contains(alices.id());
        assertThat(holders(frames.get(1))).containsEntry(0, List.of(alices.id() + " alice"))
                .containsEntry(5, List.of(bobs.id() + " bob"));
        assertThat(frames.get(1).devices().get(5).pool()).isEqualTo("DRAINING");
        assertThat(frames.get(2)).isEqualTo(frames.get(1));
        assertThat(frames.get(3).devices().get(5).utilizationPercent()).isEqualTo(42.0);
        assertThat(holders(frames.get(3))).containsEntry(5, List.of(bobs.id() + " bob"));
        assertThat(holders(frames.get(4))).containsEntry(0, List.of()).containsEntry(1, List.of())
                .containsEntry(5, List.of(bobs.id() + " bob"));
    }

    @Test
    void watchReadsTheAllocationsAStateEventLeftOutFromTheListsPages() throws Exception {
        List<Allocation> made = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            made.add(scheduler.allocate(GpuRequest.builder().deviceIndices(i).owner("u" + i).build()));
        }
        String state = json(Map.of("devices", streamDevices(), "allocations", List.of(view(made.get(0))),
                "truncated", Map.of("reason", "STATE_EVENT_BOUND", "allocationsSent", 1, "allocationsTotal", 3,
                        "maxBytes", 100, "rest", "/api/v1/allocations?after=" + made.get(0).id() + "&limit=500")));
        serve((r, x) -> {
            if (r.target().startsWith("/api/v1/allocations?after=" + made.get(0).id())) {
                x.json(200, json(List.of(view(made.get(1))))).close();
                return;
            }
            x.raw("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n\r\n");
            x.raw("event: state\ndata: " + state + "\n\n");
            Thread.sleep(60_000);
        });
        List<NodeSnapshot> frames = new ArrayList<>();
        client.watch(Duration.ofSeconds(1), f -> {
            frames.add(f);
            return false;
        });
        assertThat(holders(frames.get(0))).containsEntry(0, List.of(made.get(0).id() + " u0"))
                .containsEntry(1, List.of(made.get(1).id() + " u1")).containsEntry(2, List.of());
        assertThat(service.requests()).extracting(UnixHttpStandIn.Request::target).containsExactly("/api/v1/events",
                "/api/v1/allocations?after=" + made.get(0).id() + "&limit=500");
    }

    @Test
    void anEnvironmentNamesItsVariablesAndContainerFlags() throws Exception {
        serve((r, x) -> x.json(200, "{\"allocation\":\"a-1\",\"variables\":{\"CUDA_VISIBLE_DEVICES\":\"GPU-1\"},"
                + "\"pathPrepends\":{\"PATH\":[\"/usr/local/cuda/bin\"]},\"mounts\":[],\"installation\":{\"root\":"
                + "\"/usr/local/cuda-12.4\",\"aliases\":[],\"version\":\"12.4\",\"versionSource\":\"VERSION_JSON\","
                + "\"runtimeApiVersion\":null},\"compatibility\":{\"verdict\":\"COMPATIBLE\",\"message\":\"ok\"},"
                + "\"notes\":[],\"container\":{\"dockerArgs\":[\"--device=/dev/nvidia1\"],\"cdiArgs\":[\"--device\","
                + "\"nvidia.com/gpu=GPU-1\"]}}"));
        AllocationEnvironment e = client.environment("a-1", Optional.of(">=12.1"));
        assertThat(service.requests().get(0).target()).isEqualTo("/api/v1/allocations/a-1/environment?cuda=%3E%3D12.1");
        assertThat(e.variables()).containsEntry("CUDA_VISIBLE_DEVICES", "GPU-1");
        assertThat(e.pathPrepends()).containsEntry("PATH", List.of("/usr/local/cuda/bin"));
        assertThat(e.installation()).contains(new AllocationEnvironment.Installation("/usr/local/cuda-12.4",
                Optional.of("12.4")));
        assertThat(e.compatibility()).contains("COMPATIBLE");
        assertThat(e.dockerArgs()).containsExactly("--device=/dev/nvidia1");
        assertThat(e.containerProblem()).isEmpty();
    }

    @Test
    void durationsAreWrittenInTheServicesForm() {
        assertThat(ServiceClient.duration(Duration.ofMinutes(10))).isEqualTo("600s");
        assertThat(ServiceClient.duration(Duration.ofMillis(1500))).isEqualTo("1500ms");
        assertThat(ServiceClient.duration(Duration.ofNanos(1))).isEqualTo("1s");
        assertThatThrownBy(() -> ServiceClient.duration(Duration.ofSeconds(-1)))
                .isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> ServiceClient.duration(Duration.ofSeconds(1_000_000_000L)))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("too long");
    }

    private static String b64(String s) {
        return Base64.getEncoder().encodeToString(s.getBytes(StandardCharsets.UTF_8));
    }
}
