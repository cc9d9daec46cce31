package io.gpusched.spark;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What this JVM holds from the node ledger. Allocations are bound to the JVM's process; a shutdown hook releases them
 * on a normal exit, and the ledger reclaims them when the JVM is killed. One allocation per Spark component and
 * resource: a JVM runs one SparkContext at a time, so a component asking again (a new SparkContext after the last one
 * stopped, a retried discovery) gets back what it holds when the request is the same, and otherwise gives the old set
 * back before taking a new one; it never piles up sets that nobody uses until the JVM exits.
 */
final class JvmGpus {
    private static final Logger LOG = LoggerFactory.getLogger(JvmGpus.class);
    private static final List<Held> HELD = new ArrayList<>();
    private static boolean hooked;

    private record Held(String key, SparkGpuSettings settings, GpuRequest request, GpuInventory inventory,
                        GpuScheduler scheduler, Allocation allocation) {

        /** @return whether this holding answers {@code r} under {@code s} as it stands */
        boolean answers(SparkGpuSettings s, GpuRequest r) {
            return settings.equals(s) && request.count() == r.count() && request.minMemory().equals(r.minMemory());
        }
    }

    private JvmGpus() {
    }

    /**
     * @param key     the Spark component and resource asking ({@code spark.driver/gpu})
     * @param s       settings
     * @param request what to allocate, bound to this JVM
     * @return the allocation this JVM holds for {@code key}
     */
    static synchronized Allocation allocate(String key, SparkGpuSettings s, GpuRequest request) {
        Held prev = HELD.stream().filter(h -> h.key().equals(key)).findFirst().orElse(null);
        if (prev != null) {
            if (prev.answers(s, request) && stillHeld(prev)) {
                LOG.info("gpusched: {} asks again; it keeps GPUs {} ({})", key, prev.allocation().deviceIndices(),
                        prev.allocation().id());
                return prev.allocation();
            }
            HELD.remove(prev);
            release(prev);
        }
        GpuInventory inv = s.inventory().equals("auto") ? GpuInventories.detect()
                : GpuInventories.simulated(s.inventory().substring("simulated:".length()));
        GpuScheduler sched = null;
        try {
            sched = GpuScheduler.builder().inventory(inv).stateDir(s.stateDir())
                    .config(GpuConfig.defaults().withStrategy(s.strategy()))
                    .maintenanceInterval(Duration.ZERO).build();
            Allocation a = sched.allocate(request);
            HELD.add(new Held(key, s, request, inv, sched, a));
            if (!hooked) {
                Runtime.getRuntime().addShutdownHook(new Thread(JvmGpus::releaseAll, "gpusched-release"));
                hooked = true;
            }
            LOG.info("gpusched: {} holds GPUs {} ({}) from {}", request.jobId().orElse("this JVM"),
                    a.deviceIndices(), a.id(), s.stateDir());
            return a;
        } catch (RuntimeException e) {
            if (sched != null) {
                sched.close();
            }
            inv.close();
            throw e;
        }
    }

    static synchronized void releaseAll() {
        for (Held h : HELD) {
            release(h);
        }
        HELD.clear();
    }

    private static boolean stillHeld(Held h) {
        try {
            h.scheduler().refresh();
            return h.scheduler().allocation(h.allocation().id()).isPresent();
        } catch (RuntimeException e) {
            LOG.warn("gpusched: cannot check {} in the ledger: {}", h.allocation().id(), e.toString());
            return false;
        }
    }

    private static void release(Held h) {
        try {
            h.scheduler().release(h.allocation().id());
        } catch (RuntimeException e) {
            LOG.warn("gpusched: could not release {}: {}", h.allocation().id(), e.toString());
        } finally {
            try {
                h.scheduler().close();
            } catch (RuntimeException e) {
                LOG.warn("gpusched: closing the scheduler of {}: {}", h.allocation().id(), e.toString());
            }
            h.inventory().close();
        }
    }
}
