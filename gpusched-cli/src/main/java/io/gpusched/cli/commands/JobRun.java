package io.gpusched.cli.commands;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuScheduler;
import io.gpusched.isolation.Fence;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/** Everything a run made, undone once whatever way it ends. */
final class JobRun {
    final GpuScheduler scheduler;
    final Allocation allocation;
    volatile Process process;
    volatile Path cgroup;
    volatile Fence fence;
    private boolean cleaned;

    JobRun(GpuScheduler scheduler, Allocation allocation) {
        this.scheduler = scheduler;
        this.allocation = allocation;
    }

    synchronized void cleanUp() {
        if (cleaned) {
            return;
        }
        cleaned = true;
        Process p = process;
        if (p != null && p.isAlive()) {
            p.destroy();
        }
        if (cgroup != null) {
            killLeftovers(cgroup);
        }
        if (fence != null) {
            fence.revoke();
        }
        if (cgroup != null) {
            for (int i = 0; i < 100 && Files.exists(cgroup); i++) {
                try {
                    Files.delete(cgroup);
                } catch (IOException busy) {
                    killLeftovers(cgroup);
                    try {
                        Thread.sleep(20);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        break;
                    }
                }
            }
        }
        scheduler.release(allocation.id());
    }

    private static void killLeftovers(Path cgroup) {
        try {
            for (String pid : Files.readAllLines(cgroup.resolve("cgroup.procs"))) {
                if (!pid.isBlank()) {
                    ProcessHandle.of(Long.parseLong(pid.trim())).ifPresent(ProcessHandle::destroyForcibly);
                }
            }
        } catch (IOException | NumberFormatException ignored) {
            // the cgroup is gone or empty
        }
    }
}
