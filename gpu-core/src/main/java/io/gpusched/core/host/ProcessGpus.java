package io.gpusched.core.host;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The GPUs this JVM holds from the node ledger on behalf of its components (a Spark Worker or executor, a Flink
 * TaskManager, a plug-in), one holding per component key. Allocations must be bound to this process
 * ({@link GpuRequest#holder()}): the ledger reclaims them when the JVM is killed, and a shutdown hook releases them on
 * a normal exit. A key asking again with the same request gets back what it holds while the ledger still has it;
 * with another request it gives the old set back before taking the new one, so nothing piles up. Two components of
 * one kind in one JVM (two Workers of a local cluster) use two keys and get disjoint GPUs. The nodes opened for the
 * holdings are shared per node description and closed with their last holding.
 */
public final class ProcessGpus {
    private static final Logger LOG = LoggerFactory.getLogger(ProcessGpus.class);
    private static final Map<String, Held> HELD = new LinkedHashMap<>();
    private static final Map<NodeKey, Shared> NODES = new LinkedHashMap<>();
    private static boolean hooked;

    /**
     * Which node a holding comes from.
     *
     * @param inventory the inventory spec
     * @param stateDir  the state directory given explicitly, or empty for the {@link StateDirectory} rule
     * @param strategy  the placement strategy name
     */
    public record NodeKey(InventorySpec inventory, Optional<Path> stateDir, String strategy) {
        /** Checks for nulls. */
        public NodeKey {
            Objects.requireNonNull(inventory, "inventory");
            Objects.requireNonNull(stateDir, "stateDir");
            Objects.requireNonNull(strategy, "strategy");
        }
    }

    private static final class Shared {
        final GpuNode node;
        int users;

        Shared(GpuNode node) {
            this.node = node;
        }
    }

    private record Held(NodeKey node, GpuRequest request, Allocation allocation) {
    }

    private ProcessGpus() {
    }

    /**
     * @param key     the component asking ({@code spark.worker/gpu}, {@code flink.taskmanager/gpu}); unique per
     *                component instance in this JVM
     * @param node    which node
     * @param request what to allocate; must be bound to this process ({@code holder(HolderProcess.current())})
     * @return the allocation held for {@code key}
     * @throws io.gpusched.core.GpuAllocationException when the node cannot serve (nothing is held for the key then)
     * @throws IllegalArgumentException when the request is not bound to this process
     */
    public static synchronized Allocation acquire(String key, NodeKey node, GpuRequest request) {
        Objects.requireNonNull(key, "key");
        Objects.requireNonNull(node, "node");
        Objects.requireNonNull(request, "request");
        if (request.holder().isEmpty()) {
            throw new IllegalArgumentException("the request of " + key + " must be bound to this process "
                    + "(GpuRequest.builder().holder(HolderProcess.current())), so the node reclaims it if the JVM"
                    + " dies");
        }
        Held prev = HELD.get(key);
        if (prev != null) {
            if (prev.node().equals(node) && sameAsk(prev.request(), request) && stillHeld(prev)) {
                LOG.info("gpusched: {} asks again; it keeps GPUs {} ({})", key, prev.allocation().deviceIndices(),
                        prev.allocation().id());
                return prev.allocation();
            }
            HELD.remove(key);
            giveBack(key, prev);
        }
        Shared shared = NODES.get(node);
        boolean opened = false;
        if (shared == null) {
            shared = new Shared(GpuNode.builder().inventory(node.inventory()).stateDir(node.stateDir())
                    .strategy(node.strategy()).maintenanceInterval(Duration.ZERO).build());
            NODES.put(node, shared);
            opened = true;
        }
        Allocation a;
        try {
            a = shared.node.scheduler().allocate(request);
        } catch (RuntimeException e) {
            if (opened) {
                NODES.remove(node);
                shared.node.close();
            }
            throw e;
        }
        shared.users++;
        HELD.put(key, new Held(node, request, a));
        if (!hooked) {
            Runtime.getRuntime().addShutdownHook(new Thread(ProcessGpus::releaseAll, "gpusched-release"));
            hooked = true;
        }
        LOG.info("gpusched: {} holds GPUs {} ({}) from {}", key, a.deviceIndices(), a.id(),
                shared.node.stateDirectory().map(Path::toString).orElse("memory"));
        return a;
    }

    /**
     * Gives back what {@code key} holds.
     *
     * @param key the component
     * @return true if it held something
     */
    public static synchronized boolean release(String key) {
        Held h = HELD.remove(key);
        if (h == null) {
            return false;
        }
        giveBack(key, h);
        return true;
    }

    /** Gives back every holding (the shutdown hook calls it). */
    public static synchronized void releaseAll() {
        for (Map.Entry<String, Held> e : new ArrayList<>(HELD.entrySet())) {
            HELD.remove(e.getKey());
            giveBack(e.getKey(), e.getValue());
        }
    }

    /** @return what each key holds now */
    public static synchronized Map<String, Allocation> held() {
        Map<String, Allocation> out = new LinkedHashMap<>();
        HELD.forEach((k, h) -> out.put(k, h.allocation()));
        return out;
    }

    private static boolean sameAsk(GpuRequest a, GpuRequest b) {
        return a.count() == b.count() && a.minMemory().equals(b.minMemory()) && a.sharing() == b.sharing()
                && a.sharedMemory().equals(b.sharedMemory()) && a.deviceIndices().equals(b.deviceIndices())
                && a.deviceUuids().equals(b.deviceUuids()) && a.modelPattern().equals(b.modelPattern())
                && a.vendor().equals(b.vendor()) && a.minComputeCapability().equals(b.minComputeCapability());
    }

    private static boolean stillHeld(Held h) {
        Shared s = NODES.get(h.node());
        if (s == null) {
            return false;
        }
        try {
            s.node.scheduler().refresh();
            return s.node.scheduler().allocation(h.allocation().id()).isPresent();
        } catch (RuntimeException e) {
            LOG.warn("gpusched: cannot check {} in the ledger: {}", h.allocation().id(), e.toString());
            return false;
        }
    }

    private static void giveBack(String key, Held h) {
        Shared s = NODES.get(h.node());
        if (s == null) {
            return;
        }
        try {
            s.node.scheduler().release(h.allocation().id());
            LOG.info("gpusched: {} gave back GPUs {} ({})", key, h.allocation().deviceIndices(), h.allocation().id());
        } catch (RuntimeException e) {
            LOG.warn("gpusched: could not release {} of {}: {}", h.allocation().id(), key, e.toString());
        } finally {
            if (--s.users <= 0) {
                NODES.remove(h.node());
                try {
                    s.node.close();
                } catch (RuntimeException e) {
                    LOG.warn("gpusched: closing {}: {}", s.node, e.toString());
                }
            }
        }
    }
}
