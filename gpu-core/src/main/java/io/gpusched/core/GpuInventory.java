package io.gpusched.core;

import java.util.List;
import java.util.Optional;

/**
 * One node's GPUs as one backend sees them. Static facts ({@link #devices()}, {@link #topology()}) are read once
 * when the inventory opens; {@link #sample()} is the polling path and reads live values. Implementations are
 * thread-safe. Obtain one from {@link GpuInventories}.
 */
public interface GpuInventory extends AutoCloseable {

    /** @return the backend's name, e.g. {@code "nvml"} or {@code "simulated:dgx1-v100"} */
    String backend();

    /** @return the allocatable devices in index order (partitions instead of their parent where partitioned) */
    List<GpuDevice> devices();

    /** @return the link matrix of {@link #devices()}, computed once */
    GpuTopology topology();

    /** @return live metrics of every device; cheap, and free of per-call allocation in native backends */
    GpuSample sample();

    /**
     * @param device one of {@link #devices()}
     * @return its health as the backend knows it now; backends without a health source say healthy
     */
    default GpuHealth health(GpuDevice device) {
        return GpuHealth.HEALTHY;
    }

    /**
     * Lists the processes using a device, for draining it after release.
     *
     * @param device one of {@link #devices()}
     * @return the processes, or empty when this backend cannot list processes at all
     */
    default Optional<List<GpuProcess>> processes(GpuDevice device) {
        return Optional.empty();
    }

    /**
     * Reads what each process used on a device since the previous call for that device (per-process SM utilization
     * samples and memory), for per-allocation accounting on shared GPUs. Off the allocation path: the host's sampler
     * calls it.
     *
     * @param device one of {@link #devices()}
     * @return the sample, or empty when this backend cannot list a device's processes at all
     */
    default Optional<ProcessUsageSample> processUsage(GpuDevice device) {
        return Optional.empty();
    }

    /**
     * Registers a listener for health changes (XID errors, lost devices, recovery). Backends without a health source
     * never call it.
     *
     * @param listener called from the backend's watcher thread
     */
    default void addHealthListener(GpuHealthListener listener) {
    }

    /** @param listener a listener given to {@link #addHealthListener}; unknown ones are ignored */
    default void removeHealthListener(GpuHealthListener listener) {
    }

    /** Releases native resources (e.g. {@code nvmlShutdown}) and stops watcher threads. Idempotent. */
    @Override
    void close();
}
