package io.gpusched.cli.commands;

import io.gpusched.client.NodeClient;
import java.io.PrintStream;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import sun.misc.Signal;
import sun.misc.SignalHandler;

/**
 * Passes {@code gpusched run}'s own signals (Ctrl-C, {@code SIGTERM}, {@code SIGHUP}) on to its job, through the
 * {@link NodeClient} (a signal request to the node service; a local job's process), so the job decides how to end and
 * the command returns its exit code. Before the job starts, a signal ends the command as it would without the relay
 * ({@code 128 + n}; a queued request is dropped with the connection). Ctrl-C a second time sends {@code TERM}, a
 * third {@code KILL}. Installed for one run; {@link #close()} restores the JVM's handlers.
 */
final class SignalRelay implements AutoCloseable {
    private static final List<String> RELAYED = List.of("INT", "TERM", "HUP");

    private final NodeClient client;
    private final PrintStream err;
    private final Map<Signal, SignalHandler> previous = new LinkedHashMap<>();
    private final AtomicInteger interrupts = new AtomicInteger();
    private volatile String job;

    private SignalRelay(NodeClient client, PrintStream err) {
        this.client = client;
        this.err = err;
    }

    /** @return a relay for {@code client}'s job, handling INT, TERM and HUP from now on */
    static SignalRelay install(NodeClient client, PrintStream err) {
        SignalRelay r = new SignalRelay(client, err);
        for (String name : RELAYED) {
            try {
                Signal s = new Signal(name);
                r.previous.put(s, Signal.handle(s, r::handle));
            } catch (IllegalArgumentException e) {
                // the JVM reserves it (-Xrs) or the OS has no such signal: left to the JVM
            }
        }
        return r;
    }

    /** The job runs: signals are passed on to it from now on. */
    void started(String jobId) {
        job = jobId;
    }

    private void handle(Signal s) {
        String id = job;
        if (id == null) {
            Runtime.getRuntime().exit(128 + s.getNumber());
            return;
        }
        String send = s.getName();
        if (send.equals("INT")) {
            int n = interrupts.incrementAndGet();
            send = n == 1 ? "INT" : n == 2 ? "TERM" : "KILL";
            if (n > 1) {
                err.println("gpusched: sending " + send + " to job " + id + (n == 2 ? " (Ctrl-C again sends KILL)"
                        : ""));
            }
        }
        try {
            client.signal(id, send);
        } catch (RuntimeException e) {
            err.println("gpusched: cannot pass " + send + " on to job " + id + ": " + e.getMessage());
        }
    }

    @Override
    public void close() {
        previous.forEach((s, h) -> {
            try {
                Signal.handle(s, h);
            } catch (IllegalArgumentException ignored) {
                // as installed
            }
        });
    }
}
