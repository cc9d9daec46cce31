package io.gpusched.service.adversarial.review10;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.ServiceSettings;
import io.gpusched.core.UserQuotas;
import io.gpusched.server.Caller;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.adversarial.restart.Restarts;
import io.gpusched.testing.LocalUsers;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

/**
 * What review10's attack tests share: a node without quotas and a short kill grace, a user's own working directory,
 * and an attached job's client (a real user's curl on the socket) whose output the test reads only when it chooses:
 * until then curl's stdout pipe fills, curl stops reading the socket and the service's writes to it block, as with
 * {@code curl ... | sleep 600}.
 */
public final class Clients {
    public static final ObjectMapper JSON = new ObjectMapper();

    private Clients() {
    }

    public static GpuConfig config(Duration killGrace) {
        return Restarts.config(killGrace);
    }

    public static Path homeOf(Path tmp, LocalUsers.User user) throws IOException {
        return Restarts.homeOf(tmp, user);
    }

    /** @return a job's body (attached, one GPU, PATH only) */
    public static String jobBody(Path cwd, List<String> argv) throws IOException {
        return body(cwd, argv, false);
    }

    /** @return a detached job's body (one GPU, PATH only) */
    public static String detachedBody(Path cwd, List<String> argv) throws IOException {
        return body(cwd, argv, true);
    }

    private static String body(Path cwd, List<String> argv, boolean detach) throws IOException {
        Map<String, Object> m = jobRequest(cwd, argv, "--gpu=1");
        m.put("detach", detach);
        return JSON.writeValueAsString(m);
    }

    /** @return a job request to add fields to: {@code flags}, {@code argv}, PATH only, {@code cwd} */
    public static Map<String, Object> jobRequest(Path cwd, List<String> argv, String... flags) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("flags", List.of(flags));
        m.put("argv", argv);
        m.put("env", Map.of("PATH", "/usr/bin:/bin"));
        m.put("cwd", cwd.toString());
        return m;
    }

    /**
     * Starts a user's curl that posts {@code body} (from a file: it may be larger than an argument may be) to
     * {@code /api/v1/jobs}; its stdout (the stream, raw) is the test's to read or to leave unread.
     */
    public static Process attached(ServiceBed bed, LocalUsers.User user, String body) throws IOException {
        Path f = bed.dir.resolve("body-" + UUID.randomUUID() + ".json");
        Files.writeString(f, body);
        Files.setPosixFilePermissions(f, PosixFilePermissions.fromString("rw-r--r--"));
        return new ProcessBuilder("setpriv", "--reuid=" + user.uid(), "--regid=" + user.gid(), "--init-groups", "--",
                "curl", "-sN", "--unix-socket", bed.socket.toString(), "-X", "POST", "-H",
                "Content-Type: application/json", "--data-binary", "@" + f, "http://localhost/api/v1/jobs")
                .redirectError(ProcessBuilder.Redirect.DISCARD).start();
    }

    /** Reads a client's whole stream (until curl ends), at most {@code seconds}. */
    public static byte[] readAll(Process client, int seconds) throws Exception {
        ByteArrayOutputStream got = new ByteArrayOutputStream();
        Thread t = new Thread(() -> {
            try (InputStream in = client.getInputStream()) {
                byte[] b = new byte[64 * 1024];
                int n;
                while ((n = in.read(b)) > 0) {
                    synchronized (got) {
                        got.write(b, 0, n);
                    }
                }
            } catch (IOException e) {
                // ended
            }
        });
        t.setDaemon(true);
        t.start();
        t.join(TimeUnit.SECONDS.toMillis(seconds));
        synchronized (got) {
            return got.toByteArray();
        }
    }

    /** Reads {@code n} bytes of a client's stream (a stalled client taking a little). */
    public static void readSome(Process client, int n) throws IOException {
        client.getInputStream().readNBytes(n);
    }

    /** A stream taken apart: its non-blank lines as JSON, stdout decoded, and what came after the exit line. */
    public record Ndjson(List<JsonNode> lines, byte[] stdout, List<String> types) {
        public static Ndjson of(byte[] raw) throws IOException {
            List<JsonNode> lines = new ArrayList<>();
            List<String> types = new ArrayList<>();
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            for (String l : new String(raw, StandardCharsets.UTF_8).split("\n")) {
                if (l.isBlank()) {
                    continue;
                }
                JsonNode n;
                try {
                    n = JSON.readTree(l);
                } catch (IOException cut) {
                    types.add("<cut line of " + l.length() + " chars>");
                    continue;
                }
                lines.add(n);
                types.add(n.path("type").asText());
                if (n.path("type").asText().equals("stdout")) {
                    out.write(Base64.getDecoder().decode(n.path("data").asText()));
                }
            }
            return new Ndjson(lines, out.toByteArray(), types);
        }

        /** @return the types in order, runs of stdout lines folded ("stdout x12") */
        public String summary() {
            List<String> s = new ArrayList<>();
            String last = null;
            int n = 0;
            for (String t : types) {
                if (t.equals(last)) {
                    n++;
                    continue;
                }
                if (last != null) {
                    s.add(last + (n > 1 ? " x" + n : ""));
                }
                last = t;
                n = 1;
            }
            if (last != null) {
                s.add(last + (n > 1 ? " x" + n : ""));
            }
            return String.join(", ", s);
        }
    }

    /** Waits until one of the service's jobs runs. @return its id */
    public static String awaitRunning(NodeService s, int seconds) throws Exception {
        Caller root = ServiceBed.root();
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (System.nanoTime() < until) {
            for (Map<String, Object> j : s.jobViews(root)) {
                if ("RUNNING".equals(j.get("state"))) {
                    return (String) j.get("id");
                }
            }
            Thread.sleep(20);
        }
        throw new AssertionError("no job came to run (jobs: " + s.jobViews(root) + ")");
    }

    /** @return the views of jobs that run now */
    public static List<String> running(NodeService s) {
        List<String> r = new ArrayList<>();
        for (Map<String, Object> j : s.jobViews(ServiceBed.root())) {
            if ("RUNNING".equals(j.get("state")) || "QUEUED".equals(j.get("state"))) {
                r.add((String) j.get("id"));
            }
        }
        return r;
    }

    public static Map<String, Object> job(NodeService s, String id) {
        return s.jobViews(ServiceBed.root()).stream().filter(j -> id.equals(j.get("id"))).findFirst().orElse(Map
                .of());
    }

    /** @return every live allocation, described */
    public static List<String> held(ServiceBed bed) {
        List<String> held = new ArrayList<>();
        for (Allocation a : bed.scheduler.allocations()) {
            held.add(a.id() + " of " + a.owner().orElse("?") + " GPUs " + a.deviceIndices() + " job " + a.request()
                    .jobId().orElse("-"));
        }
        return held;
    }

    public static boolean await(BooleanSupplier c, int seconds) throws InterruptedException {
        return await(c, Duration.ofSeconds(seconds));
    }

    /** @return whether {@code c} held within {@code bound} (checked every 50 ms, and once more at the end) */
    public static boolean await(BooleanSupplier c, Duration bound) throws InterruptedException {
        long until = System.nanoTime() + bound.toNanos();
        while (System.nanoTime() < until) {
            if (c.getAsBoolean()) {
                return true;
            }
            Thread.sleep(50);
        }
        return c.getAsBoolean();
    }

    public static List<Path> jobCgroups(Path parent) throws IOException {
        return Restarts.jobCgroups(parent);
    }

    /** @return the pids in the job cgroups under {@code parent} */
    public static List<String> jobProcesses(Path parent) throws IOException {
        List<String> pids = new ArrayList<>();
        for (Path cg : jobCgroups(parent)) {
            try {
                for (String p : Files.readString(cg.resolve("cgroup.procs")).strip().split("\n")) {
                    if (!p.isBlank()) {
                        pids.add(p.strip());
                    }
                }
            } catch (IOException gone) {
                // removed meanwhile
            }
        }
        return pids;
    }

    /** @return the scheduler state (R, S, ...) of the first process named {@code comm} in the job cgroups */
    public static Optional<String> stateOf(Path parent, String comm) throws IOException {
        for (String pid : jobProcesses(parent)) {
            Path proc = Path.of("/proc", pid);
            try {
                if (Files.readString(proc.resolve("comm")).strip().equals(comm)) {
                    String stat = Files.readString(proc.resolve("stat"));
                    return Optional.of(stat.substring(stat.lastIndexOf(')') + 2).split(" ")[0]);
                }
            } catch (IOException gone) {
                // exited
            }
        }
        return Optional.empty();
    }

    /** Waits until {@code comm} has been sleeping (blocked on its full pipe) in 20 checks in a row. */
    public static void awaitBlocked(Path parent, String comm, int seconds) throws Exception {
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        int blocked = 0;
        while (System.nanoTime() < until) {
            blocked = stateOf(parent, comm).equals(Optional.of("S")) ? blocked + 1 : 0;
            if (blocked >= 20) {
                return;
            }
            Thread.sleep(50);
        }
        throw new AssertionError(comm + " never blocked on its client (processes " + jobProcesses(parent) + ")");
    }

    /** Ends what is left in the job cgroups (so the bed can be removed) and the user's processes. */
    public static void cleanUp(ServiceBed bed, LocalUsers.User user, Process... clients) throws Exception {
        LocalUsers.run(List.of("pkill", "-KILL", "-U", String.valueOf(user.uid())), 30);
        for (Process p : clients) {
            if (p != null) {
                p.destroyForcibly();
                p.waitFor(30, TimeUnit.SECONDS);
            }
        }
        if (bed.jobParent != null) {
            for (Path cg : jobCgroups(bed.jobParent)) {
                try {
                    Files.writeString(cg.resolve("cgroup.kill"), "1");
                } catch (IOException gone) {
                    // removed meanwhile
                }
            }
        }
    }

    /** @return this JVM's threads whose name starts with {@code prefix} */
    public static List<String> threads(String prefix) {
        return Thread.getAllStackTraces().keySet().stream().filter(t -> t.isAlive() && t.getName().startsWith(
                prefix)).map(Thread::getName).sorted().toList();
    }

    /**
     * @return the threads of jobs (drivers of detached jobs, output relays, enders), not the launcher's one starting
     *         thread
     */
    public static List<String> jobThreads() {
        return threads("gpusched-job-").stream().filter(n -> !n.equals("gpusched-job-starter")).toList();
    }

    /** @return where a thread named {@code name} is, its top frames, or empty */
    public static String stackOf(String name) {
        for (Map.Entry<Thread, StackTraceElement[]> e : Thread.getAllStackTraces().entrySet()) {
            if (e.getKey().getName().equals(name)) {
                StringBuilder b = new StringBuilder();
                for (int i = 0; i < Math.min(12, e.getValue().length); i++) {
                    b.append("\n    at ").append(e.getValue()[i]);
                }
                return b.toString();
            }
        }
        return "";
    }

    /** @return stack tops of threads that have a frame of {@code className} (e.g. "StreamSink") */
    public static List<String> threadsIn(String className) {
        List<String> r = new ArrayList<>();
        for (Map.Entry<Thread, StackTraceElement[]> e : Thread.getAllStackTraces().entrySet()) {
            for (StackTraceElement f : e.getValue()) {
                if (f.getClassName().endsWith(className)) {
                    r.add(e.getKey().getName() + " in " + f.getMethodName());
                    break;
                }
            }
        }
        return r;
    }

    /** @return open file descriptors of this JVM */
    public static long fds() throws IOException {
        try (java.util.stream.Stream<Path> s = Files.list(Path.of("/proc/self/fd"))) {
            return s.count();
        }
    }

    public static String repeat(char c, int n) {
        return String.valueOf(c).repeat(n);
    }

    public static String streamSummary(byte[] raw) {
        try {
            return Ndjson.of(raw).summary();
        } catch (IOException e) {
            return "unparsable: " + e;
        }
    }

    /** @return audit.log's lines naming {@code subject}, as "action=result" (in the file's order) */
    public static List<String> audited(ServiceBed bed, String subject) throws IOException {
        Path log = bed.state.resolve("audit.log");
        List<String> out = new ArrayList<>();
        if (!Files.exists(log)) {
            return out;
        }
        for (String l : Files.readAllLines(log)) {
            try {
                JsonNode n = JSON.readTree(l);
                if (subject.equals(n.path("subject").asText())) {
                    out.add(n.path("action").asText() + "=" + n.path("result").asText());
                }
            } catch (IOException e) {
                out.add("<unparsable " + l + ">");
            }
        }
        return out;
    }
}
