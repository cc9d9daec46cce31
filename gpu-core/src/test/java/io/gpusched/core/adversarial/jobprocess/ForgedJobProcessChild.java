package io.gpusched.core.adversarial.jobprocess;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.HolderProcess;
import io.gpusched.core.sim.NodeDescriptions;
import java.nio.file.Path;
import java.time.Duration;

/**
 * Run as a member of the state group (an engine's service user, not root) by {@link ForgedJobProcessAttackTest}:
 * allocates one GPU bound to itself on the shared state directory, then records as the allocation's job process a
 * process it does not own (the pid given, with its start time read from {@code /proc}), and exits, leaving its
 * allocation to the next process of the node to reclaim.
 *
 * <p>Arguments: state directory, state group, pid of the process to name.
 */
public final class ForgedJobProcessChild {
    private ForgedJobProcessChild() {
    }

    /** @param args state directory, state group, pid */
    public static void main(String[] args) throws Exception {
        try (GpuScheduler s = GpuScheduler.builder().inventory(NodeDescriptions.profile("pcie-4xa10"))
                .stateDir(Path.of(args[0])).config(GpuConfig.builder().stateGroup(args[1]).build())
                .maintenanceInterval(Duration.ZERO).auditLogging(false).build()) {
            Allocation a = s.allocate(GpuRequest.builder().count(1).jobId("forged").holder(HolderProcess.current())
                    .build());
            s.recordJobProcess(a.id(), HolderProcess.of(Long.parseLong(args[2])));
            System.out.println(a.id());
        }
    }
}
