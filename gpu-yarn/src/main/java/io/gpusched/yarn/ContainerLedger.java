package io.gpusched.yarn;

import io.gpusched.core.Allocation;
import io.gpusched.core.DeviceState;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.host.GpuNode;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
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
 * YARN offers one of its GPUs again (YARN frees a container's devices when it completes), in the same node-ledger
 * transaction as the next container's record ({@link GpuScheduler#releaseAndAllocate}).
 */
final class ContainerLedger implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(ContainerLedger.class);

    private final GpuNode node;

    ContainerLedger(GpuInventory inventory, Optional<Path> stateDir) {
        this.node = GpuNode.builder().inventory(inventory).stateDir(stateDir)
                .maintenanceInterval(Duration.ZERO).auditLogging(false).build();
    }

    /** @return the node's scheduler over the node ledger (tests, benchmarks) */
    GpuScheduler scheduler() {
        return node.scheduler();
    }

    /** @return the node ledger's state directory */
    Path stateDirectory() {
        return node.stateDirectory().orElseThrow();
    }

    /**
     * Finds the records of finished containers (one of their GPUs is offered again) and takes GPUs other processes
     * hold, or that are draining or quarantined, out of the offer. Nothing is written: the finished containers'
     * records are released together with the next grant ({@link #record}), or by {@link #releaseFinished} when
     * there is none.
     *
     * @param offer the GPUs YARN offers; those held by other processes are removed from it, saying why
     * @return the ids of the finished containers' records
     */
    synchronized List<String> reconcile(Offer offer) {
        List<String> finished = List.of();
        for (Allocation a : node.scheduler().allocations()) {
            List<Integer> held = a.deviceIndices();
            if (YarnContainerGpus.isContainerRecord(a)) {
                for (int i : held) {
                    if (offer.contains(i)) {
                        if (finished.isEmpty()) {
                            finished = new ArrayList<>(2);
                        }
                        finished.add(a.id());
                        break;
                    }
                }
            } else {
                for (int i : held) {
                    if (offer.contains(i)) {
                        offer.remove(i, "GPU " + i + " (held in the node ledger by " + a.id()
                                + a.owner().map(o -> " of " + o).orElse("") + ")");
                    }
                }
            }
        }
        for (DeviceState d : node.scheduler().devices()) {
            if (d.pool() != DeviceState.Pool.IN_POOL && offer.contains(d.index())) {
                // a released GPU whose processes have not exited (or were kept past the drain timeout)
                offer.remove(d.index(), "GPU " + d.index() + " (" + d.pool() + d.poolReason().map(r -> ": " + r)
                        .orElse("") + ")");
            }
        }
        return finished;
    }

    /**
     * Releases the finished containers' records and records the chosen GPUs under the container id found in the
     * launch environment, in one node-ledger transaction: one append, forced once; the grant is acknowledged only
     * after it is durable.
     *
     * @param finished records to release ({@link #reconcile})
     * @param last     whether the caller will not decide again: a refusal then releases the finished containers'
     *                 records on their own (otherwise nothing is written, and they stay for the next try)
     * @return false when the ledger refuses (another process took one of them meanwhile, or a finished container's
     *         GPU drains once released); the reason is logged
     */
    synchronized boolean record(List<String> finished, int[] chosen, Map<String, String> env, boolean last) {
        String cid = env == null ? null : env.get("CONTAINER_ID");
        List<Integer> indices = new ArrayList<>(chosen.length);
        for (int i : chosen) {
            indices.add(i);
        }
        GpuRequest.Builder b = GpuRequest.builder().deviceIndices(indices).owner("yarn");
        if (cid != null && !cid.isBlank()) {
            b.jobId(cid).label(YarnContainerGpus.LABEL, cid);
        } else {
            b.label(YarnContainerGpus.LABEL, "");
            LOG.warn("gpusched: the launch environment has no CONTAINER_ID; GPUs {} recorded without a container id",
                    indices);
        }
        try {
            Allocation a = node.scheduler().releaseAndAllocate(finished, b.build());
            if (LOG.isInfoEnabled()) { // no argument array per call when INFO is off
                if (!finished.isEmpty()) {
                    LOG.info("gpusched: finished containers' records {} released (YARN offers their GPUs again)",
                            finished);
                }
                LOG.info("gpusched: container {} gets GPUs {} ({} in {})", cid, indices, a.id(), stateDirectory());
            }
            return true;
        } catch (GpuAllocationException e) {
            if (last) {
                LOG.warn("gpusched: the node ledger refuses GPUs {} for container {}: {}", indices, cid,
                        e.getMessage());
                releaseFinished(finished);
            } else {
                LOG.info("gpusched: the node ledger refuses GPUs {} for container {} ({}); deciding again", indices,
                        cid, e.getMessage());
            }
            return false;
        }
    }

    /** @return the GPUs among {@code chosen} that the records {@code finished} hold */
    synchronized Set<Integer> devicesOf(List<String> finished, int[] chosen) {
        Set<Integer> out = new HashSet<>();
        for (String id : finished) {
            node.scheduler().allocation(id).ifPresent(a -> {
                for (int i : chosen) {
                    if (a.deviceIndices().contains(i)) {
                        out.add(i);
                    }
                }
            });
        }
        return out;
    }

    /** Releases finished containers' records when no grant follows (the call declines): one forced append. */
    synchronized void releaseFinished(List<String> finished) {
        if (!finished.isEmpty()) {
            int n = node.scheduler().releaseAll(finished);
            LOG.info("gpusched: {} finished container record(s) of {} released (YARN offers their GPUs again)", n,
                    finished);
        }
    }

    /**
     * Releases the records of containers YARN no longer holds devices for: their devices cgroup is gone (YARN removes
     * it when it cleans the container up, see {@link ContainerCgroups}), in one node-ledger transaction (one forced
     * append; none when nothing ended). The records are read first, then the cgroups: a record's cgroup is made after
     * the record, so a container seen without one has ended (or never started). A record younger than {@code grace}
     * is kept whatever its cgroup says (YARN makes the cgroup right after the plug-in records the container's GPUs),
     * and so is every record when the cgroups cannot be seen. A record released meanwhile by another process is skipped
     * by the ledger: a release is written once.
     *
     * @return the ids of the records released
     */
    List<String> releaseEnded(ContainerCgroups cgroups, Instant now, Duration grace) {
        Map<String, String> byContainer = new LinkedHashMap<>();
        for (Allocation a : records()) {
            String cid = a.request().labels().get(YarnContainerGpus.LABEL);
            if (YarnContainerGpus.isContainerRecord(a) && YarnContainerGpus.isContainerId(cid)
                    && !a.createdAt().plus(grace).isAfter(now)) {
                byContainer.put(cid, a.id());
            }
        }
        if (byContainer.isEmpty()) {
            return List.of();
        }
        Optional<Map<String, Boolean>> present = cgroups.look(byContainer.keySet());
        if (present.isEmpty()) {
            return List.of();
        }
        List<String> ended = new ArrayList<>();
        List<String> containers = new ArrayList<>();
        byContainer.forEach((cid, id) -> {
            if (!present.get().getOrDefault(cid, true)) {
                ended.add(id);
                containers.add(cid);
            }
        });
        if (ended.isEmpty()) {
            return List.of();
        }
        int n = node.scheduler().releaseAll(ended);
        LOG.info("gpusched: {} record(s) of ended containers released ({} of {}: YARN has cleaned them up, their"
                + " devices cgroups are gone)", n, ended, containers);
        return ended;
    }

    /**
     * @return how many of {@code registered} YARN can hand out now: healthy, not held by another process of the node
     *         ledger (YARN's own containers' records are YARN's), and in the pool (a draining or quarantined GPU counts
     *         only while a YARN container holds it)
     */
    int handOut(List<GpuDevice> registered, GpuInventory inventory) {
        Set<Integer> others = new HashSet<>();
        Set<Integer> yarn = new HashSet<>();
        for (Allocation a : node.scheduler().allocations()) {
            (YarnContainerGpus.isContainerRecord(a) ? yarn : others).addAll(a.deviceIndices());
        }
        Set<Integer> outOfPool = new HashSet<>();
        for (DeviceState d : node.scheduler().devices()) {
            if (d.pool() != DeviceState.Pool.IN_POOL) {
                outOfPool.add(d.index());
            }
        }
        int n = 0;
        for (GpuDevice d : registered) {
            int i = d.index();
            if (inventory.health(d).isHealthy() && !others.contains(i)
                    && (!outOfPool.contains(i) || yarn.contains(i))) {
                n++;
            }
        }
        return n;
    }

    /** @return the live container records (for tests and {@link YarnContainerGpus}) */
    List<Allocation> records() {
        List<Allocation> out = new ArrayList<>();
        Set<String> seen = new HashSet<>();
        for (Allocation a : node.scheduler().allocations()) {
            if (YarnContainerGpus.isContainerRecord(a) && seen.add(a.id())) {
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
