package io.gpusched.yarn;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.host.GpuNode;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The YARN plugin's side of the node ledger: each container's GPUs are recorded as an allocation whose job id and
 * {@value YarnContainerGpus#LABEL} label are the container id (YARN's {@code CONTAINER_ID}, which the NodeManager has
 * put into the launch environment by the time it asks the plugin to choose), so default-runtime containers, which
 * never see the plugin's environment, can read their GPUs back ({@code gpusched env}, {@link YarnContainerGpus}).
 * GPUs other processes of the node hold in the ledger (the CLI, Spark, Flink) are not offered to YARN containers.
 *
 * <p>The records are not bound to the NodeManager process: they survive a NodeManager restart with recovery, as the
 * containers do. YARN never tells a device plugin which container finished (Hadoop 3.4 calls
 * {@code onDevicesReleased} only from the Docker path, and without a container id), so a record is released when
 * YARN offers one of its GPUs again (YARN frees a container's devices when it completes).
 */
final class ContainerLedger implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(ContainerLedger.class);

    private final GpuNode node;

    ContainerLedger(GpuInventory inventory, Optional<Path> stateDir) {
        this.node = GpuNode.builder().inventory(inventory).stateDir(stateDir)
                .maintenanceInterval(Duration.ZERO).auditLogging(false).build();
    }

    /** @return the node ledger's state directory */
    Path stateDirectory() {
        return node.stateDirectory().orElseThrow();
    }

    /**
     * Releases the records of finished containers (one of their GPUs is offered again) and takes GPUs other
     * processes hold out of the offer.
     *
     * @param offered device indices YARN offers; those held by other processes are removed
     * @param refused where the removed ones are described
     */
    synchronized void reconcile(Set<Integer> offered, List<String> refused) {
        for (Allocation a : node.scheduler().allocations()) {
            boolean ours = a.request().labels().containsKey(YarnContainerGpus.LABEL);
            if (ours) {
                if (a.deviceIndices().stream().anyMatch(offered::contains)) {
                    node.scheduler().release(a.id());
                    LOG.info("gpusched: container {} finished (YARN offers its GPUs {} again); released {}",
                            a.request().labels().get(YarnContainerGpus.LABEL), a.deviceIndices(), a.id());
                }
            } else {
                for (int i : a.deviceIndices()) {
                    if (offered.remove(i)) {
                        refused.add("GPU " + i + " (held in the node ledger by " + a.id()
                                + a.owner().map(o -> " of " + o).orElse("") + ")");
                    }
                }
            }
        }
    }

    /**
     * Records the chosen GPUs under the container id found in the launch environment.
     *
     * @return false when the ledger refuses (another process took one of them meanwhile); the reason is logged
     */
    synchronized boolean record(List<Integer> chosen, Map<String, String> env) {
        String cid = env == null ? null : env.get("CONTAINER_ID");
        GpuRequest.Builder b = GpuRequest.builder().deviceIndices(new ArrayList<>(chosen)).owner("yarn");
        if (cid != null && !cid.isBlank()) {
            b.jobId(cid).label(YarnContainerGpus.LABEL, cid);
        } else {
            b.label(YarnContainerGpus.LABEL, "");
            LOG.warn("gpusched: the launch environment has no CONTAINER_ID; GPUs {} recorded without a container id",
                    chosen);
        }
        try {
            Allocation a = node.scheduler().allocate(b.build());
            LOG.info("gpusched: container {} gets GPUs {} ({} in {})", cid, chosen, a.id(), stateDirectory());
            return true;
        } catch (GpuAllocationException e) {
            LOG.warn("gpusched: the node ledger refuses GPUs {} for container {}: {}", chosen, cid, e.getMessage());
            return false;
        }
    }

    /** @return the live container records (for tests and {@link YarnContainerGpus}) */
    List<Allocation> records() {
        List<Allocation> out = new ArrayList<>();
        Set<String> seen = new HashSet<>();
        for (Allocation a : node.scheduler().allocations()) {
            if (a.request().labels().containsKey(YarnContainerGpus.LABEL) && seen.add(a.id())) {
                out.add(a);
            }
        }
        return out;
    }

    @Override
    public void close() {
        node.close();
    }
}
