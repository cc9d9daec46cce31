package io.gpusched.cli.commands;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.cli.CliException;
import io.gpusched.cli.GpuschedCommand;
import io.gpusched.client.AllocationEnvironment;
import io.gpusched.client.NodeClient;
import io.gpusched.core.AllocationView;
import io.gpusched.core.host.ExitCode;
import io.gpusched.core.internal.Printable;
import io.gpusched.yarn.YarnContainerGpus;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParentCommand;

/**
 * {@code gpusched env}: the GPU environment of a YARN container, read from the node ledger where the NodeManager's
 * gpusched plugin recorded the container's GPUs. YARN hands a device plugin's environment only to Docker containers;
 * a default-runtime container runs {@code eval "$(gpusched env)"} to get {@code CUDA_VISIBLE_DEVICES} and the rest.
 */
@Command(name = "env", description = "Print the GPU environment (export lines) of a YARN container, from the node"
        + " ledger: the container's GPUs as the NodeManager's gpusched plugin recorded them.")
public final class EnvCommand implements Callable<Integer> {
    @ParentCommand
    GpuschedCommand root;

    @Option(names = "--container", paramLabel = "ID",
            description = "the YARN container id (default: $CONTAINER_ID, which YARN sets in every container)")
    String container;

    @Override
    public Integer call() {
        String id = container != null ? container : root.environment().get("CONTAINER_ID");
        if (id == null || id.isBlank()) {
            throw new CliException("no container id: pass --container ID, or run inside a YARN container (YARN sets"
                    + " $CONTAINER_ID)", ExitCode.REFUSED);
        }
        YarnContainerGpus.check(id);
        // a local ledger is only read (no lock, nothing written): a container is never the NodeManager's user
        try (NodeClient n = root.client()) {
            AllocationView a = n.allocations().stream()
                    .filter(x -> YarnContainerGpus.OWNER.equals(x.owner())
                            && id.equals(x.labels().get(YarnContainerGpus.LABEL)))
                    .findFirst()
                    .orElseThrow(() -> new CliException("container " + id + " has no GPUs in "
                            + Printable.escape(String.valueOf(n.source()))
                            + " (it asked for none, it has finished, or the NodeManager's gpusched.yarn.state-dir"
                            + " is another directory: pass it with --state-dir)", ExitCode.NO_GPUS));
            AllocationEnvironment ce = n.environment(a.id(), Optional.empty());
            Map<String, String> vars = new LinkedHashMap<>(ce.variables());
            if (root.json()) {
                Map<String, Object> o = new LinkedHashMap<>();
                o.put("container", id);
                o.put("allocation", a.id()); // earlier names, kept one release: allocation (the id), gpus, env
                o.put("gpus", a.devices());
                o.putAll(a.toMapWithOldNames());
                Map<String, String> env = new LinkedHashMap<>(vars);
                ce.pathPrepends().forEach((k, v) -> env.put(k, String.join(":", v)));
                o.put("environment", env);
                o.put("env", env);
                try {
                    root.out().println(Printable.escapeJson(new ObjectMapper().writeValueAsString(o)));
                } catch (JsonProcessingException e) {
                    throw new IllegalStateException(e);
                }
                return 0;
            }
            // every line rendered before any is printed: a value that cannot be carried prints nothing
            List<String> lines = new ArrayList<>();
            lines.add("# " + Printable.escape(id) + ": GPUs " + a.devices() + " (" + Printable.escape(a.id()) + ")");
            vars.forEach((k, v) -> lines.add("export " + k + "=" + quote(v)));
            ce.pathPrepends().forEach((k, v) -> {
                if (!v.isEmpty()) {
                    lines.add("export " + k + "=" + quote(String.join(":", v)) + "${" + k + ":+:$" + k + "}");
                }
            });
            lines.forEach(root.out()::println);
        }
        return 0;
    }

    /**
     * @return {@code s} in single quotes for a POSIX shell
     * @throws CliException when {@code s} holds a character that is not printable: it would reach the terminal of a
     *                      user who runs {@code gpusched env} without {@code eval}
     */
    static String quote(String s) {
        if (!Printable.isPrintable(s)) {
            throw new CliException("a value of the container's environment holds a character a shell line cannot"
                    + " carry safely (\"" + Printable.clipped(s) + "\"); nothing printed");
        }
        return "'" + s.replace("'", "'\\''") + "'";
    }
}
