package io.gpusched.yarn;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuScheduler;
import io.gpusched.cuda.CudaEnvironment;
import io.gpusched.cuda.CudaEnvironmentResolver;
import io.gpusched.cuda.CudaRequirement;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * Which GPUs a YARN container was given, read from the node ledger where {@link GpuschedDevicePlugin} records them.
 * YARN hands a device plugin's environment only to Docker containers; a default-runtime container learns its GPUs
 * here, by its {@code CONTAINER_ID} (the {@code gpusched env} command does the same):
 *
 * <pre>{@code
 * try (GpuNode node = GpuNode.builder().inventory("auto").build()) {
 *     Map<String, String> env = YarnContainerGpus.environment(node.scheduler(), System.getenv("CONTAINER_ID"),
 *             CudaEnvironmentResolver.builder().build()).orElseThrow();
 * }
 * }</pre>
 */
public final class YarnContainerGpus {
    /** The allocation label (and job id) that carries the container id. */
    public static final String LABEL = "yarn.container";
    /** YARN's container id forms: {@code container_<clusterTs>_<app>_<attempt>_<n>}, optionally with an epoch. */
    private static final Pattern CONTAINER_ID = Pattern.compile("container_(e\\d+_)?\\d+_\\d+_\\d+_\\d+");

    private YarnContainerGpus() {
    }

    /**
     * @param ledger      a scheduler over the node ledger the NodeManager's plugin writes
     * @param containerId a YARN container id ({@code container_1700000000000_0001_01_000002})
     * @return the container's live allocation, or empty when the ledger has none for it (finished, or never given
     *         GPUs)
     * @throws IllegalArgumentException when {@code containerId} is not a YARN container id
     */
    public static Optional<Allocation> find(GpuScheduler ledger, String containerId) {
        check(containerId);
        ledger.refresh();
        return ledger.allocations().stream()
                .filter(a -> containerId.equals(a.request().labels().get(LABEL)))
                .findFirst();
    }

    /**
     * @return the job environment of the container's GPUs ({@code CUDA_VISIBLE_DEVICES} and the rest, path additions
     *         joined with {@code :}), or empty when the ledger has no allocation for it
     * @throws IllegalArgumentException when {@code containerId} is not a YARN container id
     */
    public static Optional<Map<String, String>> environment(GpuScheduler ledger, String containerId,
                                                            CudaEnvironmentResolver resolver) {
        return find(ledger, containerId).map(a -> {
            CudaEnvironment ce = resolver.resolve(a, CudaRequirement.NONE);
            return environment(ce);
        });
    }

    /**
     * @return the variables of a job environment, path additions joined with {@code :} (a container has no value of
     *         its own to extend); this class loads no Hadoop class, so hosts without Hadoop (the CLI) may use it
     */
    public static Map<String, String> environment(CudaEnvironment ce) {
        Map<String, String> out = new java.util.LinkedHashMap<>(ce.variables());
        ce.pathPrepends().forEach((k, dirs) -> {
            if (!dirs.isEmpty()) {
                out.put(k, String.join(":", dirs));
            }
        });
        return out;
    }

    /**
     * Prints a container's environment as {@code export} lines, for containers without the gpusched command:
     * {@code eval "$(java -cp gpusched-yarn-<version>.jar:slf4j-api.jar io.gpusched.yarn.YarnContainerGpus)"}.
     * Arguments: {@code [--inventory SPEC] [--state-dir DIR] [CONTAINER_ID]} (defaults: {@code auto}, the
     * {@link io.gpusched.core.host.StateDirectory} rule, {@code $CONTAINER_ID}). Exit 3 when the ledger has no GPUs
     * for the container, 2 on bad arguments.
     *
     * @param args the arguments
     */
    public static void main(String[] args) {
        String inventory = "auto";
        Optional<java.nio.file.Path> dir = Optional.empty();
        String id = System.getenv("CONTAINER_ID");
        try {
            for (int i = 0; i < args.length; i++) {
                switch (args[i]) {
                    case "--inventory" -> inventory = args[++i];
                    case "--state-dir" -> dir = Optional.of(java.nio.file.Path.of(args[++i]));
                    default -> id = args[i];
                }
            }
            check(id);
        } catch (IllegalArgumentException | ArrayIndexOutOfBoundsException e) {
            System.err.println("gpusched: " + (e instanceof IllegalArgumentException ? e.getMessage()
                    : "an option lacks its value") + "; usage: YarnContainerGpus [--inventory SPEC] [--state-dir DIR]"
                    + " [CONTAINER_ID]");
            System.exit(2);
            return;
        }
        try (io.gpusched.core.host.GpuNode node = io.gpusched.core.host.GpuNode.builder().inventory(inventory)
                .stateDir(dir).maintenanceInterval(java.time.Duration.ZERO).auditLogging(false).build()) {
            Optional<Allocation> a = find(node.scheduler(), id);
            if (a.isEmpty()) {
                System.err.println("gpusched: container " + id + " has no GPUs in the node ledger "
                        + node.stateDirectory().orElseThrow());
                System.exit(3);
                return;
            }
            System.out.println("# " + id + ": GPUs " + a.get().deviceIndices() + " (" + a.get().id() + ")");
            environment(CudaEnvironmentResolver.builder().build().resolve(a.get(), CudaRequirement.NONE))
                    .forEach((k, v) -> System.out.println("export " + k + "='" + v.replace("'", "'\\''") + "'"));
        }
    }

    /** @throws IllegalArgumentException when {@code containerId} is not a YARN container id */
    public static void check(String containerId) {
        if (containerId == null || !CONTAINER_ID.matcher(containerId).matches()) {
            throw new IllegalArgumentException("\"" + containerId + "\" is not a YARN container id; expected"
                    + " container_<cluster timestamp>_<app>_<attempt>_<number> such as"
                    + " container_1700000000000_0001_01_000002 (YARN sets $CONTAINER_ID in every container)");
        }
    }
}
