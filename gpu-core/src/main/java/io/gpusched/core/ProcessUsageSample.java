package io.gpusched.core;

import java.time.Instant;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * The processes using one device, with what each used since the previous sample of that device
 * ({@link GpuInventory#processUsage(GpuDevice)}). Where the hardware or driver cannot tell a figure per process (MIG
 * utilization, per-process energy), the sample says so and why, rather than a guess dressed as a number.
 *
 * @param takenAt                when it was read
 * @param processes              the processes seen (with memory and, where measured, utilization)
 * @param utilizationUnmeasured  why per-process utilization is not measured here (e.g. "MIG: NVML has no per-process
 *                               utilization on MIG devices"); empty when it is
 * @param memoryUnmeasured       why per-process memory is not measured here; empty when it is
 */
public record ProcessUsageSample(Instant takenAt, List<GpuProcessUsage> processes,
        Optional<String> utilizationUnmeasured, Optional<String> memoryUnmeasured) {

    /** Copies the list. */
    public ProcessUsageSample {
        Objects.requireNonNull(takenAt, "takenAt");
        processes = List.copyOf(processes);
        Objects.requireNonNull(utilizationUnmeasured, "utilizationUnmeasured");
        Objects.requireNonNull(memoryUnmeasured, "memoryUnmeasured");
    }
}
