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

    /**
     * Review23: a pid freed and taken by another process between two sweeps never leaves the list. Where the
     * attribution tells a process's incarnation (its start time), whom the pid is charged to is asked again when the
     * incarnation changes, and only then.
     */
    @Test
    void aPidTakenByAnotherProcessBetweenSweepsIsAskedAgainAndOnlyThen() {
        ScriptedNode node = new ScriptedNode(dir, AccountingSettings.defaults().withCheckpoint(Duration.ofSeconds(30)));
        try {
            Allocation a = node.allocate(GpuRequest.builder().requiredDevices(0).shared(MemorySize.ofGibibytes(4))
                    .owner("alice").build());
            Allocation b = node.allocate(GpuRequest.builder().requiredDevices(0).shared(MemorySize.ofGibibytes(4))
                    .owner("bob").build());
            int reused = 4242;
            node.pids.put(reused, a.id());
            node.starts.put(reused, 1000L);
            node.inventory.setProcessTraces(0, Map.of(reused, UsageTrace.of(Duration.ofSeconds(10), 40)));
            node.run(Duration.ofSeconds(10), 3);
            assertThat(node.asked.get(reused)).as("asked about alice's process, the same one for 3 sweeps")
                    .isEqualTo(1);
            node.pids.put(reused, b.id()); // alice's process ended; bob's took its pid before the next sweep
            node.starts.put(reused, 2000L);
            node.run(Duration.ofSeconds(10), 3);
            assertThat(node.asked.get(reused)).as("asked again once: a new process").isEqualTo(2);
            node.sampler.checkpoint();

            double ofB = node.store.day(AccountingStore.dayOf(ScriptedNode.T0)).stream()
                    .filter(r -> r instanceof Interval iv && iv.allocationId().equals(b.id()))
                    .mapToDouble(r -> ((Interval) r).devices().get(0).figures().utilizationPercentMillis).sum();
            assertThat(ofB).as("bob's utilization x time: his process's 40 %% for the last 30 s")
                    .isEqualTo(40.0 * 30_000);
        } finally {
            node.close();
        }
    }

    /**
     * Sweeps a second apart: whom a listed process works for is asked once, and checked again every 10 s (its
     * incarnation), not every sweep; a pid another process took is charged to it from the next check, at most 10 s
     * after the pid changed hands (UsageMeter.REVALIDATE_MILLIS).
     */
    @Test
    void aListedProcessIsCheckedEveryTenSecondsNotEverySweep() {
        ScriptedNode node = new ScriptedNode(dir, AccountingSettings.defaults().withCheckpoint(Duration.ofSeconds(30)));
        try {
            Allocation a = node.allocate(GpuRequest.builder().requiredDevices(0).shared(MemorySize.ofGibibytes(4))
                    .owner("alice").build());
            Allocation b = node.allocate(GpuRequest.builder().requiredDevices(0).shared(MemorySize.ofGibibytes(4))
                    .owner("bob").build());
            int reused = 4242;
            node.pids.put(reused, a.id());
            node.inventory.setProcessTraces(0, Map.of(reused, UsageTrace.of(Duration.ofSeconds(10), 40)));
            node.run(Duration.ofSeconds(1), 30);
            assertThat(node.asked.get(reused)).as("asked about a process listed for 30 sweeps, a source that cannot"
                    + " tell incarnations").isBetween(3, 4);
            node.pids.put(reused, b.id());
            node.run(Duration.ofSeconds(1), 60);
            node.sampler.checkpoint();
            double ofB = node.store.day(AccountingStore.dayOf(ScriptedNode.T0)).stream()
                    .filter(r -> r instanceof Interval iv && iv.allocationId().equals(b.id()))
                    .mapToDouble(r -> ((Interval) r).devices().get(0).figures().utilizationPercentMillis).sum();
            assertThat(ofB).as("bob's utilization x time: his process's 40 %% for at least the last 50 of 60 s")
                    .isBetween(40.0 * 50_000, 40.0 * 60_000);
        } finally {
            node.close();
        }
    }
}
