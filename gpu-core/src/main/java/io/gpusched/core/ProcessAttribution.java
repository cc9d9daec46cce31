package io.gpusched.core;

import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * Maps a process the driver lists on a GPU to whom it works for, so that per-process figures of a GPU several
 * holders share are charged to each holder, never the device's figure copied to all of them. gpusched's own rule is
 * {@link io.gpusched.core.host.AllocationAttribution} (the job's cgroup, then the holder process or its
 * descendants, then the only exclusive allocation); sources for pods and Slurm jobs chain after it with
 * {@link #orElse}.
 */
@FunctionalInterface
public interface ProcessAttribution {

    /**
     * @param device  the device the process uses
     * @param pid     its pid in the host's pid namespace (the driver knows no other)
     * @param holders the live allocations that hold the device (may be empty)
     * @return whom the process works for; empty when this source cannot tell
     */
    Optional<UsageOwner> ownerOf(GpuDevice device, int pid, List<Allocation> holders);

    /** @return this source, and {@code next} where this one cannot tell */
    default ProcessAttribution orElse(ProcessAttribution next) {
        Objects.requireNonNull(next, "next");
        return (device, pid, holders) -> {
            Optional<UsageOwner> o = ownerOf(device, pid, holders);
            return o.isPresent() ? o : next.ownerOf(device, pid, holders);
        };
    }

    /** @return a source that never tells */
    static ProcessAttribution none() {
        return (device, pid, holders) -> Optional.empty();
    }
}
