package io.gpusched.cli.commands;

import io.gpusched.cli.CliException;
import io.gpusched.cli.GpuschedCommand;
import io.gpusched.cli.Selftest;
import io.gpusched.cli.Selftest.Check;
import io.gpusched.cli.Selftest.Report;
import io.gpusched.client.ServiceClient;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.host.ExitCode;
import io.gpusched.core.host.InventorySpec;
import io.gpusched.core.internal.Json;
import io.gpusched.core.internal.Printable;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.concurrent.Callable;
import java.util.function.Supplier;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParentCommand;

/**
 * {@code gpusched selftest}: discovery agreement across the backends, health, a real fence on fake device nodes, the
 * console on a free port, the CUDA environment and a CUDA driver device query, the Kubernetes device plug-in against
 * an in-process kubelet stand-in, the node service; without GPUs (or with {@code --simulate}) on a simulated node, and
 * it says so. Exit 0 only when no check that could run failed ({@link ExitCode#FAILED} otherwise).
 */
@Command(name = "selftest", description = "Check that gpusched works on this node: discovery through every backend"
        + " agrees, GPUs are healthy, a fence keeps a process off other GPUs, the console answers, CUDA sees the GPUs,"
        + " the Kubernetes device plug-in registers and answers Allocate.")
public final class SelftestCommand implements Callable<Integer> {
    /** The profile a node without GPUs is checked on. */
    static final String FALLBACK_PROFILE = "dgx1-v100";

    @ParentCommand
    GpuschedCommand root;

    @Option(names = "--console-port", paramLabel = "PORT", defaultValue = "0",
            description = "the loopback port the console check listens on (default: a free one)")
    int consolePort;

    @Override
    public Integer call() throws IOException {
        if (consolePort < 0 || consolePort > 65535) {
            throw new CliException("--console-port " + consolePort + " is not a port: give 1 to 65535, or 0 (the"
                    + " default) for a free one");
        }
        GpuConfig config = root.config().map(GpuConfig::load).orElse(GpuConfig.defaults());
        Optional<String> simulate = root.simulate();
        List<String> providers = new ArrayList<>();
        GpuInventories.providers().stream().filter(GpuInventories.ProviderStatus::available)
                .forEach(p -> providers.add(p.name()));
        String note = null;
        if (simulate.isEmpty() && providers.isEmpty()) {
            simulate = Optional.of(FALLBACK_PROFILE);
            note = "no GPU backend here: the checks ran on a simulated " + FALLBACK_PROFILE + " node";
        }
        Path work = Files.createTempDirectory(tmpBase(), "gpusched-selftest-");
        // a stop midway (SIGTERM from systemd, Ctrl-C) runs no finally: the hook removes the fence check's cgroup and
        // device nodes and the work directory
        Thread cleanUp = new Thread(() -> Selftest.removeLeft(work), "gpusched-selftest-cleanup");
        Runtime.getRuntime().addShutdownHook(cleanUp);
        List<Check> checks = new ArrayList<>();
        String node;
        try (GpuInventory inv = simulate.isPresent() ? InventorySpec.simulated(simulate.get()).open(config)
                : InventorySpec.AUTO.open(config)) {
            node = inv.backend();
            Check discovery;
            try {
                discovery = Selftest.discovery(Selftest.discover(simulate, providers, config), simulate.isPresent());
            } catch (RuntimeException x) { // a provider that answers availability but then cannot open
                discovery = new Check("discovery", Selftest.Verdict.FAIL, "a backend could not be opened",
                        String.valueOf(x.getMessage()), "gpusched doctor shows each provider and its cause");
            }
            checks.add(discovery);
            boolean simulated = simulate.isPresent();
            List<Supplier<Check>> rest = List.of(() -> Selftest.health(inv),
                    () -> Selftest.fence(work.resolve("fence"), Selftest.REAL_FENCE),
                    () -> Selftest.console(inv, consolePort, work),
                    () -> Selftest.cuda(inv, CudaOutput.resolver(config)),
                    () -> Selftest.cudaQuery(inv, simulated),
                    () -> Selftest.kubernetes(inv, simulated, work),
                    () -> Selftest.service(ServiceClient.defaultSocket(root.environment())));
            for (Supplier<Check> c : rest) {
                if (Selftest.stopping()) {
                    break; // stopped (SIGTERM, Ctrl-C): no further check makes anything the clean-up would miss
                }
                checks.add(c.get());
            }
        } finally {
            try {
                Runtime.getRuntime().removeShutdownHook(cleanUp);
            } catch (IllegalStateException stopping) {
                // the JVM is stopping: the hook removes what is left
            }
            Selftest.deleteTree(work);
        }
        Report r = new Report(simulate.isPresent(), node, note,
                checks.stream().noneMatch(c -> c.verdict() == Selftest.Verdict.FAIL), checks);
        PrintStream out = root.out();
        if (root.json()) {
            out.println(Printable.escapeJson(Json.pretty(r)));
        } else {
            out.println("Self-test on " + e(node) + (r.simulated() ? " (simulated: this host's GPUs were not used)"
                    : ""));
            if (note != null) {
                out.println("  " + note);
            }
            for (Check c : checks) {
                out.println("  [" + c.verdict().name().toLowerCase(Locale.ROOT) + "] " + c.name() + ": "
                        + e(c.detail()));
                if (c.cause() != null) {
                    out.println("        cause: " + e(c.cause()));
                }
                if (c.remedy() != null) {
                    out.println("        -> " + e(c.remedy()));
                }
            }
            out.println(r.passed() ? "All checks that could run passed." : "Some checks failed.");
        }
        return r.passed() ? ExitCode.OK.code() : ExitCode.FAILED.code();
    }

    /**
     * @return where the self-test's work directory goes: {@code $TMPDIR} when it names a directory (the JDK itself
     *     reads only {@code java.io.tmpdir}; the fence check's remedy for a nodev /tmp names TMPDIR), else
     *     {@code java.io.tmpdir}
     */
    private Path tmpBase() {
        String t = root.environment().get("TMPDIR");
        if (t != null && t.startsWith("/") && Files.isDirectory(Path.of(t))) {
            return Path.of(t);
        }
        return Path.of(System.getProperty("java.io.tmpdir"));
    }

    private static String e(String s) {
        return Printable.escape(s);
    }
}
