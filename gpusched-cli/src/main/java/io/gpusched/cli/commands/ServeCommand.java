package io.gpusched.cli.commands;

import io.gpusched.accounting.AccountingSettings;
import io.gpusched.cli.CliException;
import io.gpusched.cli.GpuschedCommand;
import io.gpusched.cli.Node;
import io.gpusched.core.internal.AsciiNumbers;
import io.gpusched.core.internal.Durations;
import io.gpusched.core.internal.Printable;
import io.gpusched.server.ConsoleServer;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParentCommand;

/** {@code gpusched serve}: the node console (web page, REST API, Prometheus metrics) until stopped. */
@Command(name = "serve", description = "Serve the node console: a live web page, a REST API (/api/v1) and Prometheus"
        + " /metrics. Changes need the bearer token in <state-dir>/console.token.")
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

    /** Counted down when the server is up (for tests running the command in-process). */
    final CountDownLatch started = new CountDownLatch(1);
    private final CountDownLatch stop = new CountDownLatch(1);

    @Override
    public Integer call() throws InterruptedException {
        InetSocketAddress address = parseListen(listen);
        try (Node n = root.open(Optional.empty())) {
            ConsoleServer server;
            Duration every;
            try {
                every = Durations.parse(interval);
            } catch (IllegalArgumentException e) {
                throw new CliException("--interval: " + e.getMessage());
            }
            try {
                server = ConsoleServer.builder().scheduler(n.scheduler()).stateDir(n.stateDirectory())
                        .listen(address).allowRemote(allowRemote).allowedHosts(allowedHosts).sampleInterval(every)
                        .cudaPaths(n.config().cudaPaths())
                        .accounting(root.config().map(AccountingSettings::load).orElse(AccountingSettings.defaults()))
                        .build();
            } catch (IllegalStateException e) {
                throw new CliException(e.getMessage());
            } catch (IllegalArgumentException e) {
                throw new CliException(e.getMessage());
            }
            if (every.compareTo(Duration.ofMillis(100)) < 0) {
                root.err().println("note: --interval " + interval + " is under 100ms: GPUs are sampled and ticks"
                        + " pushed every " + interval + ", but the ten-minute history keeps one point per 100ms (the"
                        + " latest in each)");
            }
            try (ConsoleServer s = server) {
                try {
                    s.start();
                } catch (IllegalArgumentException | UncheckedIOException e) {
                    throw new CliException(e.getMessage());
                }
                Thread hook = new Thread(stop::countDown, "gpusched-serve-stop");
                Runtime.getRuntime().addShutdownHook(hook);
                root.out().println("gpusched console on " + s.url() + "/ for " + n.inventory().backend() + " ("
                        + n.inventory().devices().size() + " GPUs); changes need the token in " + s.token().file());
                root.out().flush();
                started.countDown();
                stop.await();
                try {
                    Runtime.getRuntime().removeShutdownHook(hook);
                } catch (IllegalStateException shuttingDown) {
                    // the hook is what stopped us
                }
            }
        }
        return 0;
    }

    /** Stops a running serve (tests). */
    public void stop() {
        stop.countDown();
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
