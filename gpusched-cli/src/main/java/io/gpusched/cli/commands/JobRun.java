package io.gpusched.cli.commands;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.host.JobCgroupException;
import io.gpusched.core.host.JobCgroups;
import io.gpusched.isolation.Fence;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/** Everything a run made, undone once whatever way it ends. */
final class JobRun {
    final GpuScheduler scheduler;
    final Allocation allocation;
    volatile Process process;
    volatile Path cgroup;
    volatile Fence fence;
    private boolean cleaned;

    private final PrintStream err;

    JobRun(GpuScheduler scheduler, Allocation allocation, PrintStream err) {
        this.scheduler = scheduler;
        this.allocation = allocation;
        this.err = err;
    }

    synchronized void cleanUp() {
        if (cleaned) {
            return;
        }
        cleaned = true;
        Process p = process;
        if (p != null && p.isAlive()) {
            p.destroy();
            if (cgroup == null) {
                // unfenced: its recorded process holds the release back (JOB_RUNNING) until it is gone
                awaitEnd(p);
            }
        }
        boolean ended = true;
        if (cgroup != null) {
            try {
                JobCgroups.kill(cgroup, allocation.id(), JobCgroups.DEFAULT_TIMEOUT);
            } catch (JobCgroupException e) {
                ended = false;
                err.println("gpusched: " + e.getMessage());
            }
        }
        if (!ended) {
            // the fence stays (revoking it would open every GPU to the processes left) and so does the allocation:
            // its release is refused while the cgroup has processes, and a reclaim ends them once this process exits
            err.println("gpusched: " + allocation.id() + " stays held, fenced, until its job's processes end");
            return;
        }
        if (fence != null) {
            try {
                fence.revoke();
            } catch (RuntimeException e) {
                err.println("gpusched: revoking the fence of " + cgroup + ": " + e.getMessage());
            }
        }
        if (cgroup != null) {
            try {
                JobCgroups.remove(cgroup, allocation.id(), JobCgroups.DEFAULT_TIMEOUT);
            } catch (JobCgroupException e) {
                err.println("gpusched: " + e.getMessage());
            }
        }
        scheduler.release(allocation.id());
    }

    /** Waits for a job told to end (SIGTERM); kills it after {@link JobCgroups#DEFAULT_TIMEOUT}. */
    private static void awaitEnd(Process p) {
        try {
            if (!p.waitFor(JobCgroups.DEFAULT_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS)) {
                p.destroyForcibly();
                p.waitFor(JobCgroups.DEFAULT_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
            }
        } catch (InterruptedException e) {
            p.destroyForcibly();
            Thread.currentThread().interrupt();
        }
    }
}
