package io.gpusched.cli.commands;

import io.gpusched.cli.CliException;
import io.gpusched.cli.GpuschedCommand;
import io.gpusched.cli.LocalOptions;
import io.gpusched.cli.ShellText;
import io.gpusched.client.AllocationEnvironment;
import io.gpusched.client.NodeClient;
import io.gpusched.core.AllocationView;
import io.gpusched.core.MemorySize;
import io.gpusched.core.internal.Durations;
import io.gpusched.core.internal.Json;
import io.gpusched.core.internal.Printable;
import io.gpusched.cuda.CudaRequirement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParentCommand;

/** {@code gpusched allocate}. */
@Command(name = "allocate", description = "Allocate GPUs; the allocation persists until gpusched release.")
public final class AllocateCommand implements Callable<Integer> {
    @ParentCommand
    GpuschedCommand root;

    @Mixin
    RequestFlags flags = new RequestFlags();

    @Option(names = "--strategy", description = "packing, spreading, topology, topology-remaining or thermal"
            + " (a local ledger only: the node service uses its own)")
    String strategy;

    @Option(names = "--cuda", paramLabel = "REQ", description = "CUDA requirement for the printed environment"
            + " (>=12.1, 12.4, 12)")
    String cuda;

    @Option(names = "--wait", paramLabel = "DURATION", description = "when the GPUs are busy, wait up to this long"
            + " (10m, 2h) in the node's queue (the service's fair queue) instead of being refused at once")
    String wait;

    @Option(names = "--format", paramLabel = "env|docker|cdi", description = "print only what a runtime needs for"
            + " this allocation: env (KEY=VALUE lines), docker (--device and -e flags) or cdi (CDI --device names and"
            + " -e flags, for a spec written by gpusched export cdi)")
    String format;

    @Override
    public Integer call() throws InterruptedException {
        RequestFlags f = flags == null ? new RequestFlags() : flags;
        f.request(); // refuses bad flags here, before anything is asked of the node
        List<String> request = f.flags();
        // every check before the allocation, so that a refusal leaves no allocate and release records behind
        if (format != null && !List.of("env", "docker", "cdi").contains(format)) {
            throw new CliException("--format " + Printable.escape(format) + ": expected env, docker or cdi");
        }
        if (cuda != null) {
            CudaRequirement.parse(cuda);
        }
        Optional<Duration> maxWait = Optional.ofNullable(wait).map(w -> {
            try {
                return Durations.parse(w);
            } catch (IllegalArgumentException e) {
                throw new CliException("--wait: " + e.getMessage());
            }
        });
        try (NodeClient n = root.client(new LocalOptions(Optional.ofNullable(strategy), false, Optional.empty(),
                true))) {
            AllocationView a = maxWait.isPresent() ? n.allocate(request, maxWait.get()) : n.allocate(request);
            AllocationEnvironment env;
            try {
                env = n.environment(a.id(), Optional.ofNullable(cuda));
                if (format != null && !format.equals("env") && env.dockerArgs().isEmpty()) {
                    throw new CliException("--format " + format + ": " + env.containerProblem()
                            .orElse("no container flags for " + a.id()));
                }
            } catch (RuntimeException e) {
                n.release(a.id());
                throw e;
            }
            if (format != null) {
                printFormat(n, a, env);
            } else if (root.json()) {
                Map<String, Object> m = a.toMap();
                m.put("environment", env.variables());
                root.out().println(Printable.escapeJson(Json.pretty(m)));
            } else {
                root.out().println("allocated " + a.id() + ": GPUs " + a.devices() + " " + a.sharing()
                        + Optional.ofNullable(a.sharedMemoryBytes()).map(x -> " (" + MemorySize.ofBytes(x)
                                .toHumanString() + " each)").orElse("")
                        + Optional.ofNullable(a.expiresAt()).map(x -> ", lease until " + x).orElse(""));
                root.out().println("environment:");
                CudaOutput.printEnvironment(root.out(), env);
                root.out().println("release with: " + releaseCommand(a));
            }
        }
        return 0;
    }

    /**
     * Prints what a runtime reads, for a shell: {@code env} as {@code NAME=value} lines a shell can {@code eval}
     * (values quoted when they need it; plain values stay as docker's {@code --env-file} reads them), {@code docker}
     * and {@code cdi} as one line of words. Everything is rendered before anything is printed: a value no shell line
     * can carry (a device UUID holding a newline) releases the allocation and prints nothing.
     */
    private void printFormat(NodeClient n, AllocationView a, AllocationEnvironment env) {
        List<String> lines = new ArrayList<>();
        try {
            if (format.equals("env")) {
                env.variables().forEach((k, v) -> lines.add(ShellText.assignment(k, v)));
            } else {
                List<String> words = new ArrayList<>();
                for (String w : format.equals("docker") ? env.dockerArgs() : env.cdiArgs()) {
                    words.add(ShellText.word(w, "--format " + format + " argument"));
                }
                lines.add(String.join(" ", words));
            }
        } catch (RuntimeException e) {
            n.release(a.id());
            throw e;
        }
        lines.forEach(root.out()::println);
        root.err().println("allocated " + Printable.escape(a.id()) + ": GPUs " + a.devices() + "; release with: "
                + releaseCommand(a));
    }

    /**
     * @return the command that releases {@code a} as it would be pasted: with the {@code --simulate}, {@code --config}
     *         and {@code --state-dir} this command was given (else the release would look in another ledger)
     */
    private String releaseCommand(AllocationView a) {
        List<String> words = new ArrayList<>(List.of("gpusched"));
        root.simulate().ifPresent(s -> words.addAll(List.of("--simulate", s)));
        root.config().ifPresent(c -> words.addAll(List.of("--config", c.toAbsolutePath().toString())));
        root.stateDir().ifPresent(d -> words.addAll(List.of("--state-dir", d.toAbsolutePath().toString())));
        words.addAll(List.of("release", a.id()));
        StringBuilder b = new StringBuilder();
        for (String w : words) {
            b.append(b.length() == 0 ? "" : " ");
            try {
                b.append(ShellText.word(w, "the release command"));
            } catch (CliException e) { // a path no shell line can carry: shown escaped, to be typed by hand
                b.append(Printable.escape(w));
            }
        }
        return b.toString();
    }
}
