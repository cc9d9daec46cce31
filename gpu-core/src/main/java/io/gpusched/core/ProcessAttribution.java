package io.gpusched.core;

import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalLong;

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

    /** The {@link #incarnation} of a pid no process has (a process that takes it later has its own start time). */
    long NO_PROCESS = -1;

    /**
     * @param pid a pid in the host's pid namespace
     * @return a token that names this process and no later one given the same pid (the kernel's start time, where this
     *         source reads one; {@link #NO_PROCESS} while no process has the pid, as for a stale driver listing):
     *         while it stays the same, whom the process works for may be remembered; empty when this source cannot
     *         tell: then it is asked again each time
     */
    default OptionalLong incarnation(int pid) {
        return OptionalLong.empty();
    }

    /**
     * @return whether this source names owners other than this node's allocations (pods, Slurm jobs): the accounting
     *         sampler then meters the GPUs no allocation holds, by whom their processes work for
     */
    default boolean namesOthers() {
        return false;
    }

    /** @return this source, and {@code next} where this one cannot tell */
    default ProcessAttribution orElse(ProcessAttribution next) {
        Objects.requireNonNull(next, "next");
        ProcessAttribution first = this;
        return new ProcessAttribution() {
            @Override
            public Optional<UsageOwner> ownerOf(GpuDevice device, int pid, List<Allocation> holders) {
                Optional<UsageOwner> o = first.ownerOf(device, pid, holders);
                return o.isPresent() ? o : next.ownerOf(device, pid, holders);
            }

            @Override
            public boolean namesOthers() {
                return first.namesOthers() || next.namesOthers();
            }

            @Override
            public OptionalLong incarnation(int pid) { // the process's, whichever source read it
                OptionalLong a = first.incarnation(pid);
                return a.isPresent() ? a : next.incarnation(pid);
            }
        };
    }

    /** @return a source that never tells */
    static ProcessAttribution none() {
        return (device, pid, holders) -> Optional.empty();
    }
}
