package io.gpusched.accounting.adversarial.review25;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingSettings;
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
 * b4813444's "a shared GPU that reads busy while no listed process does is never judged idle", half done: the check
 * is {@code total <= threshold && device > threshold} (UsageMeter.sweep, unseenBusy), so as soon as one listed process
 * shows any work, the rest of the device's utilization that no listed process explains is ignored. GPU 0 reads 95 %
 * busy; alice's process reads 30 %; bob's listed process has no per-process sample ("read 0 %", NVML) or his work runs
 * in a context the list does not show: 65 % of the device is work nobody can tie to a holder, and it may be bob's.
 * review23's case with alice's process idle is protected; with alice's process busy, bob is warned and released as
 * idle. "Unknown is never idle" / "nothing is reclaimed on a guess" (docs/ACCOUNTING.md; the doc's new wording, "or
 * reading busy while none of its listed processes is", describes exactly the half that was fixed).
 */
@Tag("adversarial")
class SharedGpuPartlyUnseenBusyTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aHolderOfASharedGpuWhoseBusyTimeNoListedProcessExplainsIsNotReleasedAsIdle() {
        IdlePolicy p = new IdlePolicy(1, Duration.ofMinutes(10), Duration.ofMinutes(20), Duration.ofMinutes(30),
                IdlePolicy.Action.RELEASE, "TERM", Duration.ofMinutes(5), List.of(), false, List.of());
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofMinutes(5)).withIdle(p))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 95)); // the device: 95 % busy
            node.sweep();
            Allocation alice = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0)
                    .shared(MemorySize.ofGibibytes(4)).owner("alice").build());
            Allocation bob = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0)
                    .shared(MemorySize.ofGibibytes(4)).owner("bob").build());
            node.pids.put(4001, alice.id());
            node.pids.put(4002, bob.id());
            node.inventory.setProcessTraces(0, Map.of(4001, UsageTrace.of(Duration.ofSeconds(10), 30), 4002,
                    UsageTrace.of(Duration.ofSeconds(10), 0)));
            List<IdleAction> steps = node.run(Duration.ofMinutes(1), 45);
            assertThat(steps).as(
                    "idle steps on GPU 0's holders; the driver reads it 95 percent busy, alice's process 30 percent")
                    .noneMatch(s -> s.action() == IdleStep.RELEASED);
            assertThat(node.scheduler.allocations()).as("live allocations").hasSize(2);
        }
    }
}
