package io.gpusched.core.adversarial.jobprocess;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.HolderProcess;
import io.gpusched.core.sim.NodeDescriptions;
import java.nio.file.Path;
import java.time.Duration;

/**
 * The two users of {@link HiddenProcessAttackTest}, each a JVM run as its own user on one shared state directory.
 * {@code hold}: as {@code gpusched run --no-isolation} does, allocates the whole node bound to itself, starts its job
 * ({@code sleep}), records the job's process, prints {@code <id> <job pid>} and waits until killed. {@code take}: opens
 * the same ledger (a reclaim runs for dead holders), prints the live ids, then asks for one GPU and prints
 * {@code GOT <id> <devices>} or {@code REFUSED <reason>}.
 *
 * <p>Arguments: {@code hold|take}, state directory, state group.
 */
public final class HiddenProcessChild {
    private HiddenProcessChild() {
    }

    /** @param args mode, state directory, state group */
    public static void main(String[] args) throws Exception {
        try (GpuScheduler s = GpuScheduler.builder().inventory(NodeDescriptions.profile("pcie-4xa10"))
                .stateDir(Path.of(args[1])).config(GpuConfig.builder().stateGroup(args[2]).build())
                .maintenanceInterval(Duration.ZERO).auditLogging(false).build()) {
            if (args[0].equals("hold")) {
                Allocation a = s.allocate(GpuRequest.builder().count(4).jobId("train")
                        .holder(HolderProcess.current()).build());
                Process job = new ProcessBuilder("sleep", "300").start();
                s.recordJobProcess(a.id(), HolderProcess.of(job.pid()));
                System.out.println(a.id() + " " + job.pid());
                System.out.flush();
                job.waitFor();
                return;
            }
            System.out.println("LIVE " + s.allocations().stream().map(Allocation::id).toList());
            try {
                Allocation b = s.allocate(GpuRequest.builder().count(1).build());
                System.out.println("GOT " + b.id() + " " + b.deviceIndices());
            } catch (GpuAllocationException e) {
                System.out.println("REFUSED " + e.reason());
            }
        }
    }
}
