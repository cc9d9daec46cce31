package io.gpusched.flink;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.HolderProcess;
import io.gpusched.core.host.ProcessGpus;
import java.util.LinkedHashSet;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.flink.api.common.externalresource.ExternalResourceDriver;

/**
 * Draws the TaskManager's GPUs from gpusched's node ledger, bound to the TaskManager's process: TaskManagers on one
 * node get disjoint GPUs; the GPUs are released when the process exits and reclaimed when it is killed. Each GPU is
 * reported as a {@link GpuschedGpuInfo} with the {@code index} property of Flink's own GPU driver and {@code uuid}.
 *
 * <p>Flink makes one driver per TaskManager (from {@code TaskManagerRunner}, once per TaskManager process), so the
 * holding is keyed per driver instance ({@link ProcessGpus}): TaskManagers sharing a JVM (a {@code MiniCluster}) get
 * disjoint GPUs, and one driver asked again gets back what it holds. Flink tells a driver nothing when its
 * TaskManager stops, so a TaskManager's GPUs are given back when its JVM exits (a TaskManager process exits when the
 * TaskManager stops); in a {@code MiniCluster} that is when the JVM exits.
 *
 * <p><b>When the node cannot serve</b>, {@link #retrieveResourceInfo} throws; Flink logs "Failed to retrieve
 * information of external resource gpu" with gpusched's reason and <i>starts the TaskManager anyway</i>, without GPU
 * infos, while its slots still advertise {@code gpu=<amount>} (Flink takes the amount from the configuration, not
 * from the driver). Operators there see an empty {@code getExternalResourceInfos("gpu")}: an operator that needs a
 * GPU should throw from {@code open()} when the set is empty (the job then fails over, and a restart strategy retries
 * it), and the node's TaskManagers should ask for no more GPUs than the node has
 * ({@code gpusched status} lists who holds what).
 */
public final class GpuschedDriver implements ExternalResourceDriver {
    private static final AtomicInteger DRIVERS = new AtomicInteger();

    private final FlinkGpuSettings settings;
    private final String key;

    /** @param settings parsed settings */
    public GpuschedDriver(FlinkGpuSettings settings) {
        this.settings = settings;
        this.key = "flink.taskmanager/gpu#" + DRIVERS.incrementAndGet();
    }

    /**
     * @throws IllegalStateException with gpusched's reason when the node cannot serve {@code gpuAmount} GPUs; Flink
     *                               then starts the TaskManager without GPU infos (see the class comment)
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
            a = ProcessGpus.acquire(key, settings.node(), b.build());
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
