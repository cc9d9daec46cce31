package io.gpusched.flink;

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
 * on a normal exit, and the ledger reclaims them when the JVM is killed.
 */
final class JvmGpus {
    private static final Logger LOG = LoggerFactory.getLogger(JvmGpus.class);
    private static final List<Held> HELD = new ArrayList<>();
    private static boolean hooked;

    private record Held(GpuInventory inventory, GpuScheduler scheduler, Allocation allocation) {
    }

    private JvmGpus() {
    }

    static synchronized Allocation allocate(FlinkGpuSettings s, GpuRequest request) {
        GpuInventory inv = s.inventory().equals("auto") ? GpuInventories.detect()
                : GpuInventories.simulated(s.inventory().substring("simulated:".length()));
        GpuScheduler sched = null;
        try {
            sched = GpuScheduler.builder().inventory(inv).stateDir(s.stateDir())
                    .config(GpuConfig.defaults().withStrategy(s.strategy()))
                    .maintenanceInterval(Duration.ZERO).build();
            Allocation a = sched.allocate(request);
            HELD.add(new Held(inv, sched, a));
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
            try {
                h.scheduler().release(h.allocation().id());
            } catch (RuntimeException e) {
                LOG.warn("gpusched: could not release {}: {}", h.allocation().id(), e.toString());
            } finally {
                h.scheduler().close();
                h.inventory().close();
            }
        }
        HELD.clear();
    }
}
