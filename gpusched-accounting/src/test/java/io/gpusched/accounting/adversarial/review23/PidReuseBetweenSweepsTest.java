package io.gpusched.accounting.adversarial.review23;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AllocationUsage;
import io.gpusched.accounting.IdlePolicy;
import io.gpusched.accounting.IdleStep;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.MemorySize;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * On a shared GPU the meter remembers whom each listed pid works for while the pid stays in the GPU's process list and
 * the GPU's holders stay the same (UsageMeter's {@code attributed} cache), and asks the attribution again only when
 * the pid leaves the list. A pid freed and taken again between two sweeps (one process ends, another user's process
 * gets its pid: a user can cycle pids to land on a chosen one) never leaves the list, so the attribution, whose holder
 * rule checks the start time so that "a reused pid is not the holder" (docs/ACCOUNTING.md), is never asked about the
 * new process. The test's attribution answers by pid, as the host's would answer for the new process.
 */
@Tag("adversarial")
class PidReuseBetweenSweepsTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aPidReusedBetweenTwoSweepsIsChargedToItsNewOwner() {
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofSeconds(30)))) {
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0)
                    .shared(MemorySize.ofGibibytes(4)).owner("alice").build());
            Allocation b = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0)
                    .shared(MemorySize.ofGibibytes(4)).owner("bob").build());
            int pid = 4242;
            node.pids.put(pid, a.id());
            node.inventory.setProcessTraces(0, Map.of(pid, UsageTrace.of(Duration.ofSeconds(10), 40)));
            node.run(Duration.ofSeconds(10), 3);
            // alice's process ends and bob's next process gets pid 4242 before the next sweep: listed at both
            node.pids.put(pid, b.id());
            node.run(Duration.ofSeconds(10), 3);
            node.sampler.checkpoint();

            double ofBob = AllocationUsage.find(node.store, b.id()).orElseThrow().total().utilizationPercentMillis();
            double ofAlice = AllocationUsage.find(node.store, a.id()).orElseThrow().total()
                    .utilizationPercentMillis();
            assertThat(ofBob).as("bob's utilization x ms: his process's 40 %% for the last 30 s (alice was charged"
                    + " %s)", ofAlice).isEqualTo(40.0 * 30_000);
        }
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aBusyHolderWhoseProcessTookAFreedPidIsNotReleasedAsIdle() {
        IdlePolicy p = new IdlePolicy(1, Duration.ofMinutes(10), Duration.ofMinutes(20), Duration.ofMinutes(30),
                IdlePolicy.Action.RELEASE, "TERM", Duration.ofMinutes(5), List.of(), false, List.of());
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofMinutes(5)).withIdle(p))) {
            node.sweep();
            Allocation bob = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0)
                    .shared(MemorySize.ofGibibytes(4)).owner("bob").build());
            Allocation alice = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0)
                    .shared(MemorySize.ofGibibytes(4)).owner("alice").build());
            int pid = 31337;
            node.pids.put(pid, bob.id()); // bob's short process
            node.inventory.setProcessTraces(0, Map.of(pid, UsageTrace.of(Duration.ofSeconds(10), 95)));
            node.run(Duration.ofSeconds(10), 1);
            // bob's process ends; alice's training starts and gets pid 31337 before the next sweep, busy at 95 %
            node.pids.put(pid, alice.id());
            List<IdleAction> steps = node.run(Duration.ofMinutes(1), 45);
            assertThat(steps).as("idle steps against alice, whose process keeps GPU 0 at 95 %")
                    .noneMatch(s -> s.allocationId().equals(alice.id()) && (s.action() == IdleStep.RELEASED
                            || s.action() == IdleStep.WARNED));
            assertThat(node.scheduler.allocations()).as("alice's allocation").anyMatch(x -> x.id().equals(
                    alice.id()));
        }
    }
}
