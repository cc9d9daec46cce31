package io.gpusched.accounting;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.Interval;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.MemorySize;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * On a shared GPU, whom a process is charged to is remembered only while its pid stays in the GPU's process list: a
 * pid that left the list and came back (reused by another holder's process) is attributed again, never charged to the
 * holder it belonged to before.
 */
class SharedGpuPidReuseTest {
    @TempDir
    Path dir;

    @Test
    void aPidThatLeftTheListIsAttributedAgainWhenItComesBack() {
        ScriptedNode node = new ScriptedNode(dir, AccountingSettings.defaults().withCheckpoint(Duration.ofSeconds(30)));
        try {
            Allocation a = node.allocate(GpuRequest.builder().requiredDevices(0).shared(MemorySize.ofGibibytes(4))
                    .owner("alice").build());
            Allocation b = node.allocate(GpuRequest.builder().requiredDevices(0).shared(MemorySize.ofGibibytes(4))
                    .owner("bob").build());
            int reused = 4242;
            int other = 5151;
            UsageTrace busy = UsageTrace.of(Duration.ofSeconds(10), 40);
            UsageTrace light = UsageTrace.of(Duration.ofSeconds(10), 10);
            node.pids.put(reused, a.id());
            node.pids.put(other, a.id());
            node.inventory.setProcessTraces(0, Map.of(reused, busy, other, light));
            node.run(Duration.ofSeconds(10), 3);
            node.inventory.setProcessTraces(0, Map.of(other, light)); // the pid leaves the list
            node.run(Duration.ofSeconds(10), 1);
            node.pids.put(reused, b.id()); // and comes back as one of bob's processes
            node.inventory.setProcessTraces(0, Map.of(reused, busy, other, light));
            node.run(Duration.ofSeconds(10), 3);
            node.sampler.checkpoint();

            double ofB = node.store.day(AccountingStore.dayOf(ScriptedNode.T0)).stream()
                    .filter(r -> r instanceof Interval iv && iv.allocationId().equals(b.id()))
                    .mapToDouble(r -> ((Interval) r).devices().get(0).figures().utilizationPercentMillis).sum();
            assertThat(ofB).as("bob's utilization x time: the reused pid's 40 %% for the last 30 s")
                    .isEqualTo(40.0 * 30_000);
        } finally {
            node.close();
        }
    }
}
