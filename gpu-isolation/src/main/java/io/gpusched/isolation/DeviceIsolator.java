package io.gpusched.isolation;

import io.gpusched.core.Allocation;
import java.nio.file.Path;
import java.util.Optional;

/** Fences job cgroups off from the GPUs their allocation does not hold. */
public interface DeviceIsolator {

    /** @return one line saying why this isolator cannot work on this host, or empty when it can */
    Optional<String> unavailabilityCause();

    /** @return true when {@link #unavailabilityCause()} is empty */
    default boolean isAvailable() {
        return unavailabilityCause().isEmpty();
    }

    /**
     * Allows exactly the allocation's device nodes and the vendor's control nodes in {@code cgroup}, and denies every
     * other GPU node of the host. Fencing a cgroup that is already fenced updates that fence.
     *
     * @throws IsolationException before writing anything for a path outside the hierarchy, with {@code ..}, a symlink
     *                            out of it, a directory that is not a cgroup or not on cgroupfs (statfs), or a host
     *                            rule no fence can be exact under; after undoing what was written for a failure
     *                            midway (the previous state is read back)
     */
    Fence fence(Path cgroup, Allocation allocation);
}
