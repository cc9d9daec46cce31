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
            return GpuschedDevicePlugin.environment(ce);
        });
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
