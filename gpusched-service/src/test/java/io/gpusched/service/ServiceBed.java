package io.gpusched.service;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.isolation.CgroupDeviceIsolator;
import io.gpusched.isolation.JobLauncher;
import io.gpusched.server.Caller;
import io.gpusched.server.ConsoleServer;
import io.gpusched.testing.LocalUsers;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.function.UnaryOperator;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A node service in this JVM on a simulated 8-GPU node ({@code dgx1-v100}) with a durable ledger: with {@link #jobs}
 * also fake GPU device nodes ({@code mknod}, majors and minors of the simulated node: 195:0..7 and nvidiactl 195:255,
 * no driver behind them, so an open the fence allows fails with ENXIO and one it refuses with EPERM), a job cgroup
 * parent of its own under the cgroup2 root, and real users. Everything is removed on close.
 */
public final class ServiceBed implements AutoCloseable {
    private static final ObjectMapper AUDIT_JSON = new ObjectMapper();
    private static final Pattern AUDIT_COUNTED = Pattern.compile("^(\\d+) refusals of uid (\\d+) not itemized");
    public final Path dir;
    public final Path state;
    public final Path dev;
    public final SimulatedGpuInventory inventory = GpuInventories.simulated("dgx1-v100");
    public final GpuScheduler scheduler;
    public final UserDirectory users = new UserDirectory();
    public final LocalUsers accounts = LocalUsers.create();
    public final GpuConfig config;
    public CgroupDeviceIsolator isolator;
    public JobLauncher launcher;
    public Path jobParent;
    public NodeService service;
    public ConsoleServer console;
    public Path socket;
    /** the service's heartbeat ({@link NodeService.Builder#heartbeat}); null: its default */
    public Duration heartbeat;
    private final List<Path> cgroups = new ArrayList<>();

    public ServiceBed(Path tmp, GpuConfig config) throws IOException {
        this.dir = tmp;
        this.state = tmp.resolve("state");
        this.dev = tmp.resolve("dev");
        this.config = config;
        this.scheduler = GpuScheduler.builder().inventory(inventory).stateDir(state).config(config).groups(users)
                .auditLogging(false).build();
    }

    /** Needs root, cgroup2 with device programs, setpriv and useradd: skips the test, saying why, when missing. */
    public ServiceBed jobs() throws Exception {
        assumeTrue(LocalUsers.available(), "skipped: making users needs root, useradd and setpriv");
        assumeTrue(Files.isExecutable(Path.of("/usr/bin/setpriv")), "skipped: util-linux setpriv is missing");
        for (Path p = dir; p != null && p.getNameCount() > 1; p = p.getParent()) {
            if (p.startsWith(Path.of("/tmp")) && !p.equals(Path.of("/tmp"))) {
                Files.setPosixFilePermissions(p, PosixFilePermissions.fromString("rwxr-xr-x"));
            }
        }
        Files.createDirectories(dev);
        Files.setPosixFilePermissions(dev, PosixFilePermissions.fromString("rwxr-xr-x"));
        for (int i = 0; i < 8; i++) {
            node("nvidia" + i, 195, i);
        }
        node("nvidiactl", 195, 255);
        Path proc = Files.createDirectories(dir.resolve("proc"));
        Files.writeString(proc.resolve("devices"),
                "Character devices:\n  1 mem\n195 nvidia-frontend\n\nBlock devices:\n");
        isolator = CgroupDeviceIsolator.builder().hostDevices(inventory.devices()).devRoot(dev).procRoot(proc)
                .stateDir(dir.resolve("iso")).mechanism(CgroupDeviceIsolator.Mechanism.V2).build();
        assumeTrue(isolator.isAvailable(), () -> "skipped: " + isolator.unavailabilityCause().orElse(""));
        assumeTrue(isolator.v2Root().isPresent(), "skipped: no cgroup2 hierarchy");
        jobParent = isolator.v2Root().get().resolve("gsu-jobs-" + UUID.randomUUID().toString().substring(0, 8));
        cgroups.add(jobParent);
        launcher = JobLauncher.builder().isolator(isolator).cgroupParent(jobParent).build();
        return this;
    }

    private void node(String name, int major, int minor) throws Exception {
        LocalUsers.Result r = LocalUsers.run(List.of("/usr/bin/mknod", "-m", "666", dev.resolve(name).toString(), "c",
                String.valueOf(major), String.valueOf(minor)), 30);
        if (r.exit() != 0) {
            throw new IOException("mknod " + name + ": " + r.err());
        }
    }

    /** @return a fresh cgroup under the cgroup2 root (removed on close), e.g. a login cgroup */
    public Path cgroup(String base) throws IOException {
        Path p = isolator.v2Root().get().resolve("gsu-" + base + "-" + UUID.randomUUID().toString().substring(0, 8));
        Files.createDirectory(p);
        cgroups.add(p);
        return p;
    }

    /** The console with the service's routes on a Unix socket under the test's directory (after {@link #start}). */
    public ConsoleServer serve() throws IOException {
        return serve(b -> b);
    }

    /**
     * As {@link #serve()}, with the console's builder adjusted first (e.g. {@code b -> b.threads(8)}, a small console
     * whose limits a few requests reach).
     */
    public ConsoleServer serve(UnaryOperator<ConsoleServer.Builder> tune) throws IOException {
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwx--x--x"));
        socket = dir.resolve("run").resolve("gpusched.sock");
        ServiceRoutes routes = new ServiceRoutes(service);
        ConsoleServer.Builder b = ConsoleServer.builder().scheduler(scheduler).stateDir(state)
                .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).unixSocket(socket);
        config.service().privateDir().ifPresent(b::privateDir);
        config.service().adminGroup().ifPresent(b::adminGroup);
        routes.routes().forEach(b::route);
        console = tune.apply(b).build();
        routes.console(console::serveOwn);
        console.start();
        return console;
    }

    /** The answer of one curl over the socket. */
    public record Answer(int status, String body) {
    }

    /**
     * Runs curl on the socket as a user (null: root).
     *
     * @param args curl's arguments after the socket, e.g. {@code -X DELETE http://localhost/api/v1/...}
     */
    public Answer curl(LocalUsers.User as, String... args) throws IOException {
        List<String> cmd = new ArrayList<>(List.of("curl", "-sS", "--max-time", "60", "-w", "\n%{http_code}",
                "--unix-socket", socket.toString()));
        cmd.addAll(List.of(args));
        LocalUsers.Result r = as == null ? LocalUsers.run(cmd, 90) : LocalUsers.runAs(as, cmd, 90);
        String out = r.out();
        int nl = out.lastIndexOf('\n');
        if (r.exit() != 0 || nl < 0) {
            throw new IOException("curl " + args[args.length - 1] + " failed (" + r.exit() + "): " + r.err() + out);
        }
        return new Answer(Integer.parseInt(out.substring(nl + 1).strip()), out.substring(0, nl));
    }

    /** @return the answer to a JSON {@code body} posted to {@code path} (e.g. {@code /api/v1/jobs}) as a user */
    public Answer post(LocalUsers.User as, String path, String body) throws IOException {
        return curl(as, "-X", "POST", "-H", "Content-Type: application/json", "--data-binary", body,
                "http://localhost" + path);
    }

    public NodeService start() {
        NodeService.Builder b = NodeService.builder().scheduler(scheduler).config(config)
                .stateDir(config.service().privateDir(state)).users(users);
        if (launcher != null) {
            b.jobs(launcher, null);
        } else {
            b.jobs(null, "this test runs no jobs");
        }
        if (isolator != null) {
            b.isolator(isolator);
        }
        if (heartbeat != null) {
            b.heartbeat(heartbeat);
        }
        service = b.build().start();
        return service;
    }

    /** @return a caller as the transport would make it for this uid (by hand: no socket in these tests) */
    public static Caller caller(String user, long uid, boolean admin, String... groups) {
        return new Caller(uid, uid, user, List.of(groups), admin);
    }

    public static Caller caller(LocalUsers.User u, boolean admin, String... groups) {
        List<String> g = new ArrayList<>(List.of(u.name()));
        g.addAll(List.of(groups));
        return new Caller(u.uid(), u.gid(), u.name(), g, admin);
    }

    /** Sets how much output of one user's ended detached jobs the service keeps (tests shrink it) @return the old */
    public static long keepOutputBytes(long v) {
        long old = Jobs.keepOutputBytes;
        Jobs.keepOutputBytes = v;
        return old;
    }

    /**
     * Sets how long the audit counts refusals before it writes their count (the service's timer looks every second).
     *
     * @return the previous setting, to restore
     */
    public static Duration auditSummaryAfter(Duration d) {
        Duration old = AuditLog.summaryAfter;
        AuditLog.summaryAfter = d;
        return old;
    }

    /**
     * Refusals each line stands for, by uid, read from the file by its documented format alone: an itemized refusal
     * is one, an {@code audit.suppressed} line the count its detail begins with.
     */
    public static Map<Long, Long> auditedRefusals(Path file) throws Exception {
        Map<Long, Long> n = new HashMap<>();
        for (String line : Files.readAllLines(file)) {
            JsonNode j = AUDIT_JSON.readTree(line);
            long uid = j.get("uid").asLong();
            if (j.get("action").asText().equals("audit.suppressed")) {
                Matcher m = AUDIT_COUNTED.matcher(j.get("detail").asText());
                assertThat(m.find()).as(line).isTrue();
                assertThat(Long.parseLong(m.group(2))).isEqualTo(uid);
                n.merge(uid, Long.parseLong(m.group(1)), Long::sum);
            } else if (!j.get("result").asText().equals("ok")) {
                n.merge(uid, 1L, Long::sum);
            }
        }
        return n;
    }

    public static Caller root() {
        return new Caller(0, 0, "root", List.of("root"), true);
    }

    @Override
    public void close() throws Exception {
        try {
            if (service != null) { // as gpusched serve stops: the service stops, the console closes, the service closes
                service.stop();
            }
            if (console != null) {
                console.close();
            }
            if (service != null) {
                service.close();
            }
            scheduler.close();
        } finally {
            for (int i = cgroups.size() - 1; i >= 0; i--) {
                removeTree(cgroups.get(i));
            }
            accounts.close();
        }
    }

    /** @return each node's line as a root process in the cgroup sees it: {@code nvidiaN open|EPERM} */
    public String loginProbe(Path cgroup) throws Exception {
        Path child = Files.createDirectory(cgroup.resolve("session-" + System.nanoTime()));
        try {
            List<String> cmd = new ArrayList<>(List.of("/bin/sh", "-c", "echo $$ > \"$0/cgroup.procs\" || exit 9;"
                    + " for f; do if err=$( (: < \"$f\") 2>&1); then echo \"${f##*/} open\"; else case \"$err\" in"
                    + " *'not permitted'*) echo \"${f##*/} EPERM\";; *) echo \"${f##*/} open\";; esac; fi; done",
                    child.toString()));
            for (int i = 0; i < 8; i++) {
                cmd.add(dev.resolve("nvidia" + i).toString());
            }
            cmd.add(dev.resolve("nvidiactl").toString());
            Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            assertThat(p.waitFor()).as(out).isZero();
            return out;
        } finally {
            removeTree(child);
        }
    }

    static void removeTree(Path cg) throws Exception {
        if (!Files.isDirectory(cg)) {
            return;
        }
        try (var s = Files.list(cg)) {
            for (Path c : s.filter(Files::isDirectory).toList()) {
                removeTree(c);
            }
        }
        for (int i = 0; i < 100 && Files.exists(cg); i++) {
            try {
                Files.delete(cg);
            } catch (IOException busy) {
                Thread.sleep(20);
            }
        }
    }

    static final Duration LONG = Duration.ofMinutes(2);
}
