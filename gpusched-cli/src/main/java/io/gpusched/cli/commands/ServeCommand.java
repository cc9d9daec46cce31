package io.gpusched.cli.commands;

import io.gpusched.accounting.AccountingSettings;
import io.gpusched.cli.AttributionChain;
import io.gpusched.cli.CliException;
import io.gpusched.cli.GpuschedCommand;
import io.gpusched.core.BackendUnavailableException;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuException;
import io.gpusched.core.host.GpuNode;
import io.gpusched.core.host.InventorySpec;
import io.gpusched.core.internal.AsciiNumbers;
import io.gpusched.core.internal.Durations;
import io.gpusched.core.internal.Printable;
import io.gpusched.isolation.CgroupDeviceIsolator;
import io.gpusched.isolation.JobLauncher;
import io.gpusched.server.ConsoleServer;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceRoutes;
import io.gpusched.service.UserDirectory;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParentCommand;

/**
 * {@code gpusched serve}: the node console (web page, REST API, Prometheus metrics) and, on the node's Unix socket,
 * the node service (docs/SERVICE.md) until stopped.
 */
@Command(name = "serve", description = "Serve the node console (a live web page, a REST API under /api/v1 and"
        + " Prometheus /metrics; changes need the bearer token in console.token, in <state-dir> or"
        + " gpu.service.private_dir) and, as root, the node"
        + " service on a Unix socket: every user's allocations, jobs run as their user and fenced, quotas, a fair"
        + " queue.")
public final class ServeCommand implements Callable<Integer> {
    @ParentCommand
    GpuschedCommand root;

    @Option(names = "--listen", paramLabel = "HOST:PORT", defaultValue = "127.0.0.1:9400",
            description = "address to listen on (default ${DEFAULT-VALUE}; port 0 picks a free one)")
    String listen;

    @Option(names = "--allow-remote", description = "allow a --listen address beyond loopback (every request then"
            + " needs the token)")
    boolean allowRemote;

    @Option(names = "--interval", defaultValue = "1s", description = "how often GPUs are sampled and changes pushed"
            + " (default ${DEFAULT-VALUE}, at least 1ms; under 100ms the ten-minute history keeps one point per 100ms)")
    String interval;

    @Option(names = "--allowed-host", paramLabel = "NAME", description = "another Host name the console answers to"
            + " (repeatable; e.g. the node's DNS name with --allow-remote); loopback names are always accepted, other"
            + " names get 421 (DNS rebinding guard)")
    List<String> allowedHosts = new ArrayList<>();

    @Option(names = "--socket", paramLabel = "PATH", description = "serve the node service on this Unix socket"
            + " (default gpu.service.socket, /run/gpusched/gpusched.sock, on a real node; with --simulate only when"
            + " given). Runs as root: jobs run as their callers")
    Path socket;

    @Option(names = "--socket-group", paramLabel = "GROUP", description = "only members of GROUP may connect to the"
            + " socket (mode 0660; default gpu.service.socket_group, else any local user: 0666)")
    String socketGroup;

    /** Counted down when the server is up (for tests running the command in-process). */
    final CountDownLatch started = new CountDownLatch(1);
    private final CountDownLatch stop = new CountDownLatch(1);
    private final CountDownLatch stopped = new CountDownLatch(1);

    @Override
    public Integer call() throws InterruptedException {
        InetSocketAddress address = parseListen(listen);
        Duration every;
        try {
            every = Durations.parse(interval);
        } catch (IllegalArgumentException e) {
            throw new CliException("--interval: " + e.getMessage());
        }
        GpuConfig config = root.config().map(GpuConfig::load).orElse(GpuConfig.defaults());
        boolean service = socket != null || root.simulate().isEmpty();
        UserDirectory users = new UserDirectory();
        GpuNode node;
        try {
            node = GpuNode.builder().inventory(root.simulate().map(InventorySpec::simulated).orElse(
                    InventorySpec.AUTO)).config(config).stateDir(root.stateDir()).auditLogging(false)
                    .maintenanceInterval(service ? Duration.ofSeconds(1) : Duration.ZERO).groups(users).build();
        } catch (BackendUnavailableException e) {
            throw new CliException("no GPU backend is available here (" + String.join("; ", e.causes())
                    + "); use --simulate dgx1-v100 (or another profile) to try gpusched without GPUs");
        }
        try (GpuNode n = node) {
            n.scheduler().updateMetrics(n.inventory().sample());
            Path state = n.stateDirectory().orElseThrow();
            Path own = config.service().privateDir(state); // token, accounting, job output, lock, fence records
            NodeService svc = null;
            ConsoleServer server;
            try {
                AccountingSettings accounting = root.config().map(AccountingSettings::load).orElse(
                        AccountingSettings.defaults());
                ConsoleServer.Builder cb = ConsoleServer.builder().scheduler(n.scheduler()).stateDir(state)
                        .listen(address).allowRemote(allowRemote).allowedHosts(allowedHosts).sampleInterval(every)
                        .cudaPaths(config.cudaPaths()).accounting(accounting)
                        .attribution(AttributionChain.of(accounting));
                config.service().privateDir().ifPresent(cb::privateDir);
                ServiceRoutes routes = null;
                if (service) {
                    svc = nodeService(n, config, users, own);
                    routes = new ServiceRoutes(svc);
                    routes.routes().forEach(cb::route);
                    cb.unixSocket(socket != null ? socket : config.service().socket());
                    Optional.ofNullable(socketGroup).or(() -> config.service().socketGroup()).ifPresent(
                            cb::socketGroup);
                    config.service().adminGroup().ifPresent(cb::adminGroup);
                }
                server = cb.build();
                if (routes != null) {
                    routes.console(server::serveOwn);
                }
            } catch (IllegalStateException | IllegalArgumentException | GpuException e) {
                if (svc != null) {
                    svc.close();
                }
                throw new CliException(e.getMessage());
            }
            if (every.compareTo(Duration.ofMillis(100)) < 0) {
                root.err().println("note: --interval " + interval + " is under 100ms: GPUs are sampled and ticks"
                        + " pushed every " + interval + ", but the ten-minute history keeps one point per 100ms (the"
                        + " latest in each)");
            }
            // closed in reverse: the service stops first (its waits and jobs end and their clients are told), then
            // the console lets those answers finish before it closes the connections, and the service closes last
            // (its audit), so that what the console refused meanwhile is audited too
            try (NodeService s2 = svc; ConsoleServer s = server; Stopping stopping = new Stopping(svc)) {
                if (s2 != null) {
                    try {
                        s2.start(); // ends what a killed predecessor left, fences logins: before serving anyone
                    } catch (GpuException e) {
                        throw new CliException("the node service cannot start: " + e.getMessage());
                    }
                    s2.recovered().forEach(r -> root.err().println("gpusched serve: on start, " + r));
                }
                try {
                    s.start();
                } catch (IllegalArgumentException | IllegalStateException | UncheckedIOException e) {
                    throw new CliException(e.getMessage());
                }
                Thread hook = new Thread(() -> {
                    stop.countDown();
                    try { // the JVM ends when the hooks end: let the jobs be ended and the fences revoked first
                        stopped.await(config.service().killGrace().toSeconds() + 60, TimeUnit.SECONDS);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                }, "gpusched-serve-stop");
                Runtime.getRuntime().addShutdownHook(hook);
                root.out().println("gpusched console on " + s.url() + "/ for " + n.inventory().backend() + " ("
                        + n.inventory().devices().size() + " GPUs); changes need the token in " + s.token().file());
                if (s2 != null) {
                    root.out().println("gpusched node service on " + s.socketPath().orElseThrow()
                            + s2.jobsUnavailable().map(w -> "; jobs are off: " + w).orElse("")
                            + (s2.loginCgroups().isEmpty() ? "" : "; logins fenced off the GPUs: "
                                    + s2.loginCgroups()));
                }
                root.out().flush();
                started.countDown();
                stop.await();
                try {
                    Runtime.getRuntime().removeShutdownHook(hook);
                } catch (IllegalStateException shuttingDown) {
                    // the hook is what stopped us
                }
            }
        } finally {
            stopped.countDown();
        }
        return 0;
    }

    /** Stops a node service when closed: before the console closes, while the service itself closes after it. */
    private record Stopping(NodeService service) implements AutoCloseable {
        @Override
        public void close() {
            if (service != null) {
                service.stop();
            }
        }
    }

    /** The node service on this node: jobs where the host can fence and switch users, refused (saying why) else. */
    private NodeService nodeService(GpuNode n, GpuConfig config, UserDirectory users, Path own) {
        if (!"root".equals(System.getProperty("user.name"))) {
            throw new CliException("the node service runs as root (it starts jobs as their users and fences"
                    + " cgroups); run gpusched serve as root, or with --simulate and without --socket for the console"
                    + " alone");
        }
        JobLauncher launcher = null;
        String why = null;
        CgroupDeviceIsolator iso = null;
        try {
            iso = CgroupDeviceIsolator.builder().hostDevices(n.inventory().devices())
                    .stateDir(own.resolve("isolation")).build();
            if (!iso.isAvailable()) {
                why = iso.unavailabilityCause().orElse("cgroup isolation is unavailable");
            } else {
                JobLauncher.Builder lb = JobLauncher.builder().isolator(iso);
                config.service().jobCgroupParent().ifPresent(lb::cgroupParent);
                config.service().jobGroup().ifPresent(lb::jobGroup);
                launcher = lb.build();
            }
        } catch (GpuException e) {
            why = e.getMessage();
        }
        NodeService.Builder b = NodeService.builder().scheduler(n.scheduler()).config(config).stateDir(own)
                .users(users).jobs(launcher, why);
        if (iso != null && iso.isAvailable()) {
            b.isolator(iso);
        }
        return b.build();
    }

    /** Stops a running serve (tests). */
    public void stop() {
        stop.countDown();
    }

    /** Waits until a stopped serve has ended its jobs and closed (tests). */
    void awaitStopped() throws InterruptedException {
        stopped.await();
    }

    static InetSocketAddress parseListen(String value) {
        int colon = value.lastIndexOf(':');
        if (colon < 0) {
            throw new CliException("--listen " + Printable.escape(value) + ": expected HOST:PORT, e.g. 127.0.0.1:9400");
        }
        String host = value.substring(0, colon).replaceAll("^\\[|]$", "");
        int port;
        try {
            port = AsciiNumbers.parseInt(value.substring(colon + 1), 0, 65535, "the port");
        } catch (IllegalArgumentException e) {
            throw new CliException("--listen " + Printable.escape(value) + ": " + e.getMessage());
        }
        try {
            return new InetSocketAddress(InetAddress.getByName(host.isEmpty() ? "127.0.0.1" : host), port);
        } catch (UnknownHostException e) {
            throw new CliException("--listen " + Printable.escape(value) + ": unknown host " + Printable.escape(host));
        }
    }
}
