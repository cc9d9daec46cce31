package io.gpusched.cli.commands;

import io.gpusched.cdi.CdiOptions;
import io.gpusched.cdi.ContainerDevices;
import io.gpusched.cli.CliException;
import io.gpusched.cli.GpuschedCommand;
import io.gpusched.cli.Node;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.internal.Json;
import io.gpusched.cuda.CudaEnvironment;
import io.gpusched.cuda.CudaRequirement;
import java.util.LinkedHashMap;
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

    @Option(names = "--strategy", description = "packing, spreading, topology, topology-remaining or thermal")
    String strategy;

    @Option(names = "--cuda", paramLabel = "REQ", description = "CUDA requirement for the printed environment"
            + " (>=12.1, 12.4, 12)")
    String cuda;

    @Option(names = "--format", paramLabel = "env|docker|cdi", description = "print only what a runtime needs for"
            + " this allocation: env (KEY=VALUE lines), docker (--device and -e flags) or cdi (CDI --device names and"
            + " -e flags, for a spec written by gpusched export cdi)")
    String format;

    @Override
    public Integer call() {
        GpuRequest request = (flags == null ? new RequestFlags() : flags).request();
        CudaRequirement req = cuda == null ? CudaRequirement.NONE : CudaRequirement.parse(cuda);
        try (Node n = root.open(Optional.ofNullable(strategy))) {
            Allocation a = n.scheduler().allocate(request);
            CudaEnvironment env;
            try {
                env = CudaOutput.resolver(n).resolve(a, req);
            } catch (RuntimeException e) {
                n.scheduler().release(a.id());
                throw e;
            }
            if (format != null) {
                printFormat(n, a, env);
            } else if (root.json()) {
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("id", a.id());
                m.put("devices", a.deviceIndices());
                m.put("uuids", a.deviceUuids());
                m.put("sharing", a.sharing().name());
                m.put("expiresAt", a.expiresAt().map(Object::toString).orElse(null));
                m.put("environment", env.variables());
                root.out().println(Json.pretty(m));
            } else {
                root.out().println("allocated " + a.id() + ": GPUs " + a.deviceIndices() + " " + a.sharing()
                        + a.sharedMemory().map(x -> " (" + x.toHumanString() + " each)").orElse("")
                        + a.expiresAt().map(x -> ", lease until " + x).orElse(""));
                root.out().println("environment:");
                CudaOutput.printEnvironment(root.out(), env);
                root.out().println("release with: gpusched " + (root.simulate().isPresent() ? "--simulate "
                        + root.simulate().get() + " " : "") + "release " + a.id());
            }
        }
        return 0;
    }

    private void printFormat(Node n, Allocation a, CudaEnvironment env) {
        switch (format) {
            case "env" -> env.variables().forEach((k, v) -> root.out().println(k + "=" + v));
            case "docker", "cdi" -> {
                ContainerDevices c;
                try {
                    c = ContainerDevices.of(a, n.inventory().devices(), CdiOptions.defaults());
                } catch (RuntimeException e) {
                    n.scheduler().release(a.id());
                    throw e;
                }
                root.out().println(String.join(" ", format.equals("docker") ? c.dockerArgs() : c.cdiArgs()));
            }
            default -> {
                n.scheduler().release(a.id());
                throw new CliException("--format " + format + ": expected env, docker or cdi");
            }
        }
        root.err().println("allocated " + a.id() + ": GPUs " + a.deviceIndices() + "; release with: gpusched "
                + (root.simulate().isPresent() ? "--simulate " + root.simulate().get() + " " : "") + "release "
                + a.id());
    }
}
