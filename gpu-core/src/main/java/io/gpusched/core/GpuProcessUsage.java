package io.gpusched.core;

import java.util.Objects;
import java.util.Optional;
import java.util.OptionalDouble;

/**
 * What one process used on one device over a backend's sample period: the basis of per-allocation accounting on a GPU
 * that several allocations share (never the device's own figure copied to each holder).
 *
 * @param pid                  process id in the host's pid namespace (the driver knows no other)
 * @param smUtilizationPercent the process's mean SM utilization over the period (NVML's per-process samples), 0 to 100,
 *                             where measured
 * @param memoryUsed           device memory the process holds now, where measured
 */
public record GpuProcessUsage(int pid, OptionalDouble smUtilizationPercent, Optional<MemorySize> memoryUsed) {

    /** @throws IllegalArgumentException for a pid below 1 or a utilization outside 0 to 100 */
    public GpuProcessUsage {
        if (pid < 1) {
            throw new IllegalArgumentException("pid must be >= 1, was " + pid);
        }
        Objects.requireNonNull(smUtilizationPercent, "smUtilizationPercent");
        Objects.requireNonNull(memoryUsed, "memoryUsed");
        if (smUtilizationPercent.isPresent()
                && !(smUtilizationPercent.getAsDouble() >= 0 && smUtilizationPercent.getAsDouble() <= 100)) {
            throw new IllegalArgumentException("SM utilization must be 0 to 100 %, was "
                    + smUtilizationPercent.getAsDouble());
        }
    }
}
