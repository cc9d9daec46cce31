package io.gpusched.isolation;

import io.gpusched.core.Allocation;
import java.nio.file.Path;
import java.util.List;

/** A live fence on one cgroup. {@link #close()} removes exactly what it added. */
public interface Fence extends AutoCloseable {

    /** @return the cgroup directory */
    Path cgroup();

    /** @return the allocation the fence currently admits */
    Allocation allocation();

    /** @return "v1" or "v2" */
    String mechanism();

    /** @return the rules in force, first match wins */
    List<DeviceRule> rules();

    /** @return optional nodes that were skipped, and why */
    List<String> notes();

    /** @return false once revoked */
    boolean isActive();

    /**
     * Replaces the rules with those of another allocation; on failure the previous rules stay in force.
     *
     * @throws IsolationException naming the failed step
     */
    void update(Allocation allocation);

    /**
     * Removes what this fence added; the cgroup is back to the host's policy. Idempotent. A cgroup that is gone (or
     * whose path now names another cgroup) is left alone and the fence becomes inactive.
     *
     * @throws IsolationException when the host's policy could not be restored; the fence then stays active and in
     *                            force
     */
    void revoke();

    /** Same as {@link #revoke()}. */
    @Override
    default void close() {
        revoke();
    }
}
