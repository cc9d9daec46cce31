package io.gpusched.accounting.adversarial.review23;

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
 * A shared GPU that the driver reads 95 % busy, whose listed processes (one of alice's, one of bob's) have no
 * per-process sample (NVML: "a listed process without a sample read 0 %"): the work runs in something the process list
 * does not show (another PID namespace's or VM's context, a graphics context, MPS). On a shared GPU the meter reads only
 * the per-process figures and never looks at the device's own utilization, so both holders read 0 % and are released
 * as idle. docs/ACCOUNTING.md: while unattributed processes are busy "no holder of that GPU ... is judged idle", and
 * "nothing is reclaimed on a guess"; a device busy at 95 % with no listed process busy is that case.
 */
@Tag("adversarial")
class SharedGpuBusyUnseenTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void holdersOfASharedGpuTheDeviceReadsBusyAreNotReleasedAsIdle() {
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
            node.inventory.setProcessTraces(0, Map.of(4001, UsageTrace.of(Duration.ofSeconds(10), 0), 4002,
                    UsageTrace.of(Duration.ofSeconds(10), 0)));
            List<IdleAction> steps = node.run(Duration.ofMinutes(1), 45);
            assertThat(steps).as("idle steps against the holders of GPU 0, which the driver reads 95 % busy")
                    .noneMatch(s -> s.action() == IdleStep.RELEASED);
            assertThat(node.scheduler.allocations()).as("live allocations").hasSize(2);
        }
    }
}
