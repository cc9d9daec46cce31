package io.gpusched.core.host;

import io.gpusched.core.GpuException;
import java.nio.file.Path;
import java.util.List;
import java.util.Objects;

/**
 * A job cgroup could not be ended: its processes could not be killed (not permitted, or they did not die in time), it
 * could not be removed, or the path is not one {@link JobCgroups} acts on (not a job cgroup on a cgroup file system).
 * The message names the cgroup, the processes left and what to do.
 */
public class JobCgroupException extends GpuException {
    private static final long serialVersionUID = 1L;

    private final transient Path cgroup;
    private final List<Long> pids;

    /**
     * @param cgroup  the cgroup directory
     * @param pids    the processes still in it (empty when none or unknown)
     * @param message a sentence naming the cgroup and what to do
     */
    public JobCgroupException(Path cgroup, List<Long> pids, String message) {
        super(message);
        this.cgroup = Objects.requireNonNull(cgroup, "cgroup");
        this.pids = List.copyOf(pids);
    }

    /** @return the cgroup directory */
    public Path cgroup() {
        return cgroup;
    }

    /** @return the processes still in it when it gave up (empty when none or unknown) */
    public List<Long> pids() {
        return pids;
    }
}
