package io.gpusched.cli.service;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationView;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.internal.Durations;
import io.gpusched.server.ConsoleServer;
import io.gpusched.testing.ForegroundSignals;
import io.gpusched.testing.UnixHttpStandIn;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A stand-in of the node service for the command's tests, built to docs/SERVICE.md until the real service is merged:
 * a Unix socket (the test's {@link UnixHttpStandIn}) in front of the real console ({@link ConsoleServer} on loopback,
 * its token added), so node, devices, topology, allocations, an allocation's environment and the event stream are
 * the console's own handlers over a real simulated scheduler; the service's own routes (a queued allocation, renew,
 * whoami, queue, jobs) are answered here, jobs run as this test's user without a fence.
 */
final class ServiceStandIn implements AutoCloseable {
    private static final ObjectMapper M = new ObjectMapper();

    final GpuScheduler scheduler;
    final ConsoleServer console;
    final UnixHttpStandIn socket;
    private final HttpClient http = HttpClient.newHttpClient();
    private final Path dir;
    private final Map<String, Job> jobs = new ConcurrentHashMap<>();

    /** A job this stand-in runs. */
    static final class Job {
        final String id;
        final Allocation allocation;
        final Process process;
        final boolean detached;
        final Path output;
        volatile Integer exit;

        Job(String id, Allocation allocation, Process process, boolean detached, Path output) {
            this.id = id;
            this.allocation = allocation;
            this.process = process;
            this.detached = detached;
            this.output = output;
        }
    }

    ServiceStandIn(Path dir, String profile) throws Exception {
        this.dir = dir;
        Path state = Files.createDirectories(dir.resolve("service-state"));
        scheduler = GpuScheduler.builder().inventory(GpuInventories.simulated(profile)).stateDir(state)
                .auditLogging(false).build();
        console = ConsoleServer.builder().scheduler(scheduler).stateDir(state).listen(
                new InetSocketAddress("127.0.0.1", 0)).build().start();
        socket = new UnixHttpStandIn(dir.resolve("gpusched.sock"), this::handle);
    }

    Path path() {
        return socket.socket();
    }

    private void handle(UnixHttpStandIn.Request r, UnixHttpStandIn.Reply x) throws Exception {
        String path = r.target().replaceFirst("\\?.*", "");
        String route = r.method() + " " + path;
        if (route.equals("POST /api/v1/allocations") && M.readTree(r.body()).has("wait")) {
            JsonNode b = M.readTree(r.body());
            List<String> flags = new ArrayList<>();
            b.get("flags").forEach(f -> flags.add(f.asText()));
            flags.add("--owner=root");
            try {
                Allocation a = scheduler.allocate(GpuRequests.fromCliFlags(flags),
                        Durations.parse(b.get("wait").asText()));
                x.json(201, json(AllocationView.of(a, Instant.now()).toMap()));
            } catch (GpuAllocationException e) {
                x.json(409, json(Map.of("status", 409, "error", e.getMessage(), "reason", e.reason().name())));
            }
        } else if (r.method().equals("POST") && path.endsWith("/renew")) {
            String id = path.substring("/api/v1/allocations/".length(), path.length() - "/renew".length());
            try {
                Allocation a = scheduler.renew(id, Durations.parse(M.readTree(r.body()).get("lease").asText()));
                x.json(200, json(AllocationView.of(a, Instant.now()).toMap()));
            } catch (GpuAllocationException e) {
                x.json(404, json(Map.of("status", 404, "error", e.getMessage(), "reason", e.reason().name())));
            }
        } else if (route.equals("GET /api/v1/whoami")) {
            x.json(200, "{\"uid\":0,\"gid\":0,\"user\":\"root\",\"groups\":[\"root\"],\"admin\":true}");
        } else if (route.equals("GET /api/v1/queue")) {
            x.json(200, "[{\"position\":1,\"user\":\"bob\",\"uid\":1002,\"request\":\"--gpu=8\",\"since\":"
                    + "\"2026-11-22T10:00:00Z\"}]");
        } else if (path.startsWith("/api/v1/jobs")) {
            jobs(r, x, path);
        } else {
            forward(r, x);
        }
    }

    private void jobs(UnixHttpStandIn.Request r, UnixHttpStandIn.Reply x, String path) throws Exception {
        if (r.method().equals("POST") && path.equals("/api/v1/jobs")) {
            JsonNode b = M.readTree(r.body());
            List<String> flags = new ArrayList<>();
            b.get("flags").forEach(f -> flags.add(f.asText()));
            flags.add("--owner=root");
            Allocation a;
            try {
                a = scheduler.allocate(GpuRequests.fromCliFlags(flags));
            } catch (GpuAllocationException e) {
                x.json(409, json(Map.of("status", 409, "error", e.getMessage(), "reason", e.reason().name())));
                return;
            }
            // signals at their defaults, as the real service starts its jobs (env --default-signal)
            List<String> argv = new ArrayList<>(ForegroundSignals.prefix());
            b.get("argv").forEach(f -> argv.add(f.asText()));
            ProcessBuilder pb = new ProcessBuilder(argv).directory(Path.of(b.get("cwd").asText()).toFile());
            pb.environment().clear();
            b.get("env").fields().forEachRemaining(e -> pb.environment().put(e.getKey(), e.getValue().asText()));
            pb.environment().put("CUDA_VISIBLE_DEVICES", String.join(",", a.deviceUuids()));
            String id = "j-" + a.id();
            boolean detached = b.get("detach").asBoolean();
            Path out = dir.resolve(id + ".log");
            if (detached) {
                pb.redirectErrorStream(true).redirectOutput(out.toFile());
            }
            Process p = pb.start();
            Job job = new Job(id, a, p, detached, out);
            jobs.put(id, job);
            Thread reaper = new Thread(() -> { // not Process.onExit: its future completes on the common pool, which
                // on JDK 25 with one CPU's parallelism waits behind any task blocked there (LaunchedJob.waitFor)
                try {
                    job.exit = p.waitFor();
                    scheduler.release(a.id());
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }, "stand-in-job-" + id);
            reaper.setDaemon(true);
            reaper.start();
            if (detached) {
                x.json(201, json(view(job)));
                return;
            }
            x.chunkedHead(200, "application/x-ndjson");
            x.chunk(json(Map.of("type", "started", "job", view(job), "allocation",
                    AllocationView.of(a, Instant.now()).toMap())) + "\n");
            Thread err = new Thread(() -> pump(p.getErrorStream(), "stderr", x));
            err.start();
            pump(p.getInputStream(), "stdout", x);
            err.join();
            int code = p.waitFor();
            Map<String, Object> exit = new LinkedHashMap<>();
            exit.put("type", "exit");
            exit.put("code", code);
            exit.put("signal", null);
            x.chunk(json(exit) + "\n").lastChunk();
            return;
        }
        String rest = path.substring("/api/v1/jobs".length());
        if (rest.isEmpty()) {
            List<Map<String, Object>> all = new ArrayList<>();
            for (Job j : jobs.values()) {
                all.add(view(j));
            }
            x.json(200, json(all));
            return;
        }
        String id = rest.substring(1).replaceFirst("/.*", "");
        Job j = jobs.get(id);
        if (j == null) {
            x.json(404, json(Map.of("status", 404, "error", "no job " + id, "reason", "UNKNOWN_JOB")));
        } else if (rest.endsWith("/logs")) {
            j.process.waitFor();
            x.answer(200, "text/plain", Files.readString(j.output));
        } else if (rest.endsWith("/signal")) {
            String sig = M.readTree(r.body()).get("signal").asText();
            new ProcessBuilder("kill", "-s", sig, Long.toString(j.process.pid())).start().waitFor();
            x.json(200, json(view(j)));
        } else if (r.method().equals("DELETE")) {
            j.process.destroy();
            j.process.waitFor();
            x.json(200, json(view(j)));
        } else {
            x.json(200, json(view(j)));
        }
    }

    private static void pump(InputStream in, String type, UnixHttpStandIn.Reply x) {
        byte[] b = new byte[4096];
        int n;
        try {
            while ((n = in.read(b)) > 0) {
                String data = Base64.getEncoder().encodeToString(Arrays.copyOf(b, n));
                synchronized (x) {
                    x.chunk("{\"type\":\"" + type + "\",\"data\":\"" + data + "\"}\n");
                }
            }
        } catch (Exception e) {
            // the client went away
        }
    }

    private Map<String, Object> view(Job j) {
        Map<String, Object> v = new LinkedHashMap<>();
        v.put("id", j.id);
        v.put("owner", "root");
        v.put("uid", 0);
        boolean alive = j.process.isAlive();
        v.put("state", alive ? "RUNNING" : "EXITED");
        v.put("allocationId", j.allocation.id());
        v.put("devices", j.allocation.deviceIndices());
        v.put("createdAt", j.allocation.createdAt().toString());
        v.put("startedAt", j.allocation.createdAt().toString());
        v.put("endedAt", null);
        v.put("exitCode", alive ? null : j.process.exitValue());
        v.put("signal", null);
        v.put("detached", j.detached);
        v.put("cgroup", null);
        v.put("argv", List.of("sh"));
        v.put("cwd", "/");
        v.put("output", j.detached ? j.output.toString() : null);
        return v;
    }

    private void forward(UnixHttpStandIn.Request r, UnixHttpStandIn.Reply x) throws Exception {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(console.url() + r.target()))
                .header("Authorization", "Bearer " + console.token().value())
                .method(r.method(), r.body().length == 0 ? HttpRequest.BodyPublishers.noBody()
                        : HttpRequest.BodyPublishers.ofByteArray(r.body()));
        if (r.body().length > 0) {
            b.header("Content-Type", "application/json");
        }
        HttpResponse<InputStream> a = http.send(b.build(), HttpResponse.BodyHandlers.ofInputStream());
        String type = a.headers().firstValue("content-type").orElse("application/json");
        try (InputStream in = a.body()) {
            if (type.startsWith("text/event-stream")) {
                x.raw("HTTP/1.1 " + a.statusCode() + " OK\r\nContent-Type: " + type + "\r\n\r\n");
                byte[] buf = new byte[8192];
                int n;
                while ((n = in.read(buf)) > 0) {
                    x.raw(Arrays.copyOf(buf, n));
                }
                return;
            }
            x.answer(a.statusCode(), type, new String(in.readAllBytes(), StandardCharsets.UTF_8));
        }
    }

    private static String json(Object o) throws Exception {
        return M.writeValueAsString(o);
    }

    /** @return the stand-in's job of that id */
    Job job(String id) {
        return jobs.get(id);
    }

    @Override
    public void close() throws Exception {
        socket.close();
        for (Job j : jobs.values()) {
            j.process.destroyForcibly();
        }
        console.close();
        scheduler.close();
    }

    /** @return an allocation made directly on the service's scheduler (another user's, say) */
    Allocation allocate(GpuRequest r) {
        return scheduler.allocate(r);
    }
}
