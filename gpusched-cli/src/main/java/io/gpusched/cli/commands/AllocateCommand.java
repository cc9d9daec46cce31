package io.gpusched.cli.commands;

import io.gpusched.cli.CliException;
import io.gpusched.cli.GpuschedCommand;
import io.gpusched.cli.LocalOptions;
import io.gpusched.client.AllocationEnvironment;
import io.gpusched.client.NodeClient;
import io.gpusched.core.AllocationView;
import io.gpusched.core.MemorySize;
import io.gpusched.core.internal.Durations;
import io.gpusched.core.internal.Json;
import io.gpusched.cuda.CudaRequirement;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.Callable;
import picocli.CommandLine.ArgGroup;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParentCommand;

/** {@code gpusched allocate}. */
@Command(name = "allocate", description = "Allocate GPUs; the allocation persists until gpusched release.")
public final class AllocateCommand implements Callable<Integer> {
    @ParentCommand
    GpuschedCommand root;

    @ArgGroup(exclusive = false)
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
        if (cuda != null) {
            CudaRequirement.parse(cuda);
        }
        if (format != null && !List.of("env", "docker", "cdi").contains(format)) {
            throw new CliException("--format " + format + ": expected env, docker or cdi");
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
                printFormat(a, env);
            } else if (root.json()) {
                Map<String, Object> m = a.toMap();
                m.put("environment", env.variables());
                root.out().println(Json.pretty(m));
            } else {
                root.out().println("allocated " + a.id() + ": GPUs " + a.devices() + " " + a.sharing()
                        + Optional.ofNullable(a.sharedMemoryBytes()).map(x -> " (" + MemorySize.ofBytes(x)
                                .toHumanString() + " each)").orElse("")
                        + Optional.ofNullable(a.expiresAt()).map(x -> ", lease until " + x).orElse(""));
                root.out().println("environment:");
                CudaOutput.printEnvironment(root.out(), env);
                root.out().println("release with: gpusched " + (root.simulate().isPresent() ? "--simulate "
                        + root.simulate().get() + " " : "") + "release " + a.id());
            }
        }
        return 0;
    }

    private void printFormat(AllocationView a, AllocationEnvironment env) {
        switch (format) {
            case "env" -> env.variables().forEach((k, v) -> root.out().println(k + "=" + v));
            default -> root.out().println(String.join(" ", format.equals("docker") ? env.dockerArgs()
                    : env.cdiArgs()));
        }
        root.err().println("allocated " + a.id() + ": GPUs " + a.devices() + "; release with: gpusched "
                + (root.simulate().isPresent() ? "--simulate " + root.simulate().get() + " " : "") + "release "
                + a.id());
    }
}
