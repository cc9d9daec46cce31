package io.gpusched.accounting.adversarial.accounting;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AllocationUsage;
import io.gpusched.accounting.IdlePolicy;
import io.gpusched.accounting.IdleStep;
import io.gpusched.accounting.UsageFigures;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.MemorySize;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A GPU held by one shared allocation, busy at 95 % with a process the attribution cannot tie to it (a container's
 * process, not in the job cgroup and not a descendant of the holder). docs/ACCOUNTING.md: "a GPU not measured ... is
 * never judged idle: nothing is reclaimed on a guess". Charging 0 % to the only holder of a GPU that is 95 % busy, then
 * releasing it as idle, is exactly such a guess.
 */
@Tag("adversarial")
class SharedGpuIdleTest {
    @TempDir
    Path dir;

    @Test
    void theOnlyHolderOfABusySharedGpuIsNotReleasedAsIdle() {
        IdlePolicy p = new IdlePolicy(1, Duration.ofMinutes(10), Duration.ofMinutes(20), Duration.ofMinutes(30),
                IdlePolicy.Action.RELEASE, "TERM", Duration.ofMinutes(5), List.of(), false, List.of());
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofMinutes(5)).withIdle(p))) {
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(1)
                    .shared(MemorySize.ofGibibytes(8)).owner("alice").build());
            node.inventory.setProcessTraces(1, Map.of(5555, new UsageTrace(Duration.ofSeconds(10), List.of(95.0),
                    List.of(MemorySize.ofGibibytes(6)), List.of())));
            List<IdleAction> steps = node.run(Duration.ofMinutes(1), 60);
            assertThat(steps).as("idle steps taken against a GPU busy at 95 %%")
                    .noneMatch(s -> s.action() == IdleStep.RELEASED);
            assertThat(node.scheduler.allocations()).as("alice's allocation").anyMatch(x -> x.id().equals(a.id()));
        }
    }

    @Test
    void noIdleTimeIsCountedWhileProcessesTiedToNoHolderAreBusy() {
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofSeconds(30)))) {
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(1)
                    .shared(MemorySize.ofGibibytes(8)).owner("alice").build());
            node.inventory.setProcessTraces(1, Map.of(5555, new UsageTrace(Duration.ofSeconds(10), List.of(95.0),
                    List.of(MemorySize.ofGibibytes(6)), List.of())));
            node.run(Duration.ofMinutes(1), 5);
            node.scheduler.release(a.id());
            AllocationUsage u = AllocationUsage.find(node.store, a.id()).orElseThrow();
            UsageFigures f = u.total();
            assertThat(f.utilizationMillis()).as("alice's own processes: measured, none busy").isEqualTo(300_000);
            assertThat(f.idleMillis()).as("idle ms while an untied process ran the GPU at 95 %%").isZero();
            assertThat(u.devices().get(0).notes()).anyMatch(n -> n.startsWith("not judged idle"));
        }
    }
}
