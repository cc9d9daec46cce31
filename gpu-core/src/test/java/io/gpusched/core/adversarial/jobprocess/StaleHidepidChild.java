package io.gpusched.core.adversarial.jobprocess;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.HolderProcess;
import io.gpusched.core.sim.NodeDescriptions;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;

/**
 * Bob's long-running process of {@link StaleHidepidAttackTest} (an engine's JVM): first takes one GPU bound to a
 * process of its own that then dies, and has it reclaimed (so this JVM has looked at how {@code /proc} is mounted);
 * prints {@code READY}; after a line on stdin (sent once {@code /proc} was remounted {@code hidepid=2}) prints the
 * live ids and asks for one GPU: {@code GOT <id> <devices>} or {@code REFUSED <reason>}.
 *
 * <p>Arguments: state directory, state group.
 */
public final class StaleHidepidChild {
    private StaleHidepidChild() {
    }

    /** @param args state directory, state group */
    public static void main(String[] args) throws Exception {
        try (GpuScheduler s = GpuScheduler.builder().inventory(NodeDescriptions.profile("pcie-4xa10"))
                .stateDir(Path.of(args[0])).config(GpuConfig.builder().stateGroup(args[1]).build())
                .maintenanceInterval(Duration.ZERO).auditLogging(false).build()) {
            Process own = new ProcessBuilder("sleep", "300").start();
            Allocation mine = s.allocate(GpuRequest.builder().count(1).holder(HolderProcess.of(own.pid())).build());
            own.destroyForcibly();
            own.waitFor();
            for (int i = 0; i < 100 && s.allocations().stream().anyMatch(a -> a.id().equals(mine.id())); i++) {
                Thread.sleep(100);
            }
            System.out.println("READY " + s.allocations().stream().map(Allocation::id).toList());
            System.out.flush();
            new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
            System.out.println("LIVE " + s.allocations().stream().map(Allocation::id).toList());
            try {
                Allocation b = s.allocate(GpuRequest.builder().count(1).build());
                System.out.println("GOT " + b.id() + " " + b.deviceIndices());
            } catch (GpuAllocationException e) {
                System.out.println("REFUSED " + e.reason());
            }
            System.out.flush();
        }
    }
}
