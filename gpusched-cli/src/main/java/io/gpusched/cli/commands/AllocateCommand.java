package io.gpusched.cli.commands;

import io.gpusched.cdi.CdiOptions;
import io.gpusched.cdi.ContainerDevices;
import io.gpusched.cli.CliException;
import io.gpusched.cli.GpuschedCommand;
import io.gpusched.cli.Node;
import io.gpusched.cli.ShellText;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.internal.Json;
import io.gpusched.core.internal.Printable;
import io.gpusched.cuda.CudaEnvironment;
import io.gpusched.cuda.CudaRequirement;
import java.util.ArrayList;
import java.util.LinkedHashMap;
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
        // every check before the allocation, so that a refusal leaves no allocate and release records behind
        if (format != null && !List.of("env", "docker", "cdi").contains(format)) {
            throw new CliException("--format " + Printable.escape(format) + ": expected env, docker or cdi");
        }
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
                root.out().println(Printable.escapeJson(Json.pretty(m)));
            } else {
                root.out().println("allocated " + a.id() + ": GPUs " + a.deviceIndices() + " " + a.sharing()
                        + a.sharedMemory().map(x -> " (" + x.toHumanString() + " each)").orElse("")
                        + a.expiresAt().map(x -> ", lease until " + x).orElse(""));
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
    private void printFormat(Node n, Allocation a, CudaEnvironment env) {
        List<String> lines = new ArrayList<>();
        try {
            if (format.equals("env")) {
                env.variables().forEach((k, v) -> lines.add(ShellText.assignment(k, v)));
            } else {
                ContainerDevices c = ContainerDevices.of(a, n.inventory().devices(), CdiOptions.defaults());
                List<String> words = new ArrayList<>();
                for (String w : format.equals("docker") ? c.dockerArgs() : c.cdiArgs()) {
                    words.add(ShellText.word(w, "--format " + format + " argument"));
                }
                lines.add(String.join(" ", words));
            }
        } catch (RuntimeException e) {
            n.scheduler().release(a.id());
            throw e;
        }
        lines.forEach(root.out()::println);
        root.err().println("allocated " + a.id() + ": GPUs " + a.deviceIndices() + "; release with: "
                + releaseCommand(a));
    }

    /**
     * @return the command that releases {@code a} as it would be pasted: with the {@code --simulate}, {@code --config}
     *         and {@code --state-dir} this command was given (else the release would look in another ledger)
     */
    private String releaseCommand(Allocation a) {
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
