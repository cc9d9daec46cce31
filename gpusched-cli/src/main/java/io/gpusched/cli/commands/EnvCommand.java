package io.gpusched.cli.commands;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.gpusched.cli.CliException;
import io.gpusched.cli.GpuschedCommand;
import io.gpusched.cli.Node;
import io.gpusched.core.Allocation;
import io.gpusched.core.internal.Printable;
import io.gpusched.cuda.CudaEnvironment;
import io.gpusched.cuda.CudaRequirement;
import io.gpusched.yarn.YarnContainerGpus;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
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
    /** Exit code when the ledger has no GPUs for the container. */
    static final int NO_GPUS = 3;

    @ParentCommand
    GpuschedCommand root;

    @Option(names = "--container", paramLabel = "ID",
            description = "the YARN container id (default: $CONTAINER_ID, which YARN sets in every container)")
    String container;

    @Override
    public Integer call() {
        String id = container != null ? container : System.getenv("CONTAINER_ID");
        if (id == null || id.isBlank()) {
            throw new CliException("no container id: pass --container ID, or run inside a YARN container (YARN sets"
                    + " $CONTAINER_ID)", 2);
        }
        YarnContainerGpus.check(id);
        // read only (no lock, nothing written): a container is never the NodeManager's user
        Node.Read node = root.readLedger();
        Allocation a = YarnContainerGpus.find(node.ledger(), id).orElseThrow(() -> new CliException(
                "container " + id + " has no GPUs in the node ledger " + node.stateDirectory()
                        + " (it asked for none, it has finished, or the NodeManager's gpusched.yarn.state-dir"
                        + " is another directory: pass it with --state-dir)",
                NO_GPUS));
        CudaEnvironment ce = CudaOutput.resolver(node.config()).resolve(a, CudaRequirement.NONE);
        Map<String, String> vars = new LinkedHashMap<>(ce.variables());
        if (root.json()) {
            ObjectMapper m = new ObjectMapper();
            ObjectNode o = m.createObjectNode();
            o.put("container", id);
            o.put("allocation", a.id());
            a.deviceIndices().forEach(o.putArray("gpus")::add);
            a.deviceUuids().forEach(o.putArray("uuids")::add);
            ObjectNode env = o.putObject("env");
            vars.forEach(env::put);
            ce.pathPrepends().forEach((k, v) -> env.put(k, String.join(":", v)));
            root.out().println(Printable.escapeJson(o.toString()));
            return 0;
        }
        // every line rendered before any is printed: a value that cannot be carried prints nothing
        List<String> lines = new ArrayList<>();
        lines.add("# " + Printable.escape(id) + ": GPUs " + a.deviceIndices() + " (" + Printable.escape(a.id()) + ")");
        vars.forEach((k, v) -> lines.add("export " + k + "=" + quote(v)));
        ce.pathPrepends().forEach((k, v) -> {
            if (!v.isEmpty()) {
                lines.add("export " + k + "=" + quote(String.join(":", v)) + "${" + k + ":+:$" + k + "}");
            }
        });
        lines.forEach(root.out()::println);
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
