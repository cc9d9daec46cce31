package io.gpusched.flink;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.HolderProcess;
import java.util.LinkedHashSet;
import java.util.Set;
import org.apache.flink.api.common.externalresource.ExternalResourceDriver;

/**
 * Draws the TaskManager's GPUs from gpusched's node ledger, bound to the TaskManager's process: TaskManagers on one
 * node get disjoint GPUs; the GPUs are released when the process exits and reclaimed when it is killed. Each GPU is
 * reported as a {@link GpuschedGpuInfo} with the {@code index} property of Flink's own GPU driver and {@code uuid}.
 */
public final class GpuschedDriver implements ExternalResourceDriver {

    private final FlinkGpuSettings settings;

    /** @param settings parsed settings */
    public GpuschedDriver(FlinkGpuSettings settings) {
        this.settings = settings;
    }

    /**
     * @throws IllegalStateException with gpusched's reason when the node cannot serve {@code gpuAmount} GPUs; the
     *                               TaskManager then does not start
     */
    @Override
    public Set<GpuschedGpuInfo> retrieveResourceInfo(long gpuAmount) {
        if (gpuAmount < 1 || gpuAmount > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("external-resource amount " + gpuAmount
                    + ": gpusched hands out whole GPUs: expected a count of at least 1");
        }
        GpuRequest.Builder b = GpuRequest.builder().count((int) gpuAmount).holder(HolderProcess.current())
                .owner("flink").jobId("Flink TaskManager pid " + ProcessHandle.current().pid());
        settings.memoryPerGpu().ifPresent(b::minMemory);
        Allocation a;
        try {
            a = JvmGpus.allocate(settings, b.build());
        } catch (GpuAllocationException e) {
            throw new IllegalStateException("gpusched cannot give " + gpuAmount + " GPU(s) to the Flink TaskManager"
                    + " (pid " + ProcessHandle.current().pid() + "): " + e.reason() + ": " + e.getMessage(), e);
        }
        Set<GpuschedGpuInfo> out = new LinkedHashSet<>();
        for (GpuDevice d : a.devices()) {
            out.add(new GpuschedGpuInfo(d.index(), d.uuid(), d.pciBusId()));
        }
        return out;
    }
}
