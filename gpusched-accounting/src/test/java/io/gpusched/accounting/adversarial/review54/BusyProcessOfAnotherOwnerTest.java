package io.gpusched.accounting.adversarial.review54;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AllocationUsage;
import io.gpusched.accounting.IdlePolicy;
import io.gpusched.accounting.IdleStep;
import io.gpusched.accounting.UsageFigures;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.MemorySize;
import io.gpusched.core.ProcessAttribution;
import io.gpusched.core.UsageOwner;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review 54. docs/ACCOUNTING.md, shared GPUs: "A process no rule ties to a holder is charged to no one; while such
 * processes are busy above gpu.idle.threshold, no holder of that GPU counts idle time or is judged idle (they may be
 * its: a container's process outside the job cgroup)", and the sources chain as documented:
 * {@code AllocationAttribution.host().orElse(SlurmJobAttribution.host()).orElse(PodResourcesAttribution.host())}.
 *
 * <p>A process that gpusched's rule ties to no holder but the chained Slurm source (or the pod source) names a
 * {@code SLURM_JOB} (or {@code POD}) owner for is still tied to no holder of the GPU. UsageMeter counts a process as
 * unattributed only when the chain answered nothing at all: one that a later source named is neither charged to a
 * holder nor "unattributed", so the GPU busy at 95 % with it leaves its holder reading 0 %, counting idle time and
 * released as idle. On a Slurm node running gpusched (alice's job step started her work beside, not below, her holder
 * process) that is alice's own work; the pod source names the pod holding the GPU for every process on it, whoever's.
 */
@Tag("adversarial")
class BusyProcessOfAnotherOwnerTest {
    @TempDir
    Path dir;

    static final int JOB_PROCESS = 5555;

    /** gpusched's own rule ties no process here (no job cgroup, not below the holder); Slurm names job 4242. */
    final Map<Integer, String> mine = new ConcurrentHashMap<>();
    final ProcessAttribution chain = ((ProcessAttribution) (d, pid, holders) -> Optional.ofNullable(mine.get(pid))
            .map(UsageOwner::allocation)).orElse((d, pid, holders) -> pid == JOB_PROCESS
                    ? Optional.of(new UsageOwner(UsageOwner.Kind.SLURM_JOB, "4242", Map.of("step", "0",
                            "cgroup", "v2")))
                    : Optional.empty());

    @Test
    void theHolderOfASharedGpuBusyWithAProcessTiedToNoHolderIsNotReleasedAsIdle() {
        IdlePolicy p = new IdlePolicy(1, Duration.ofMinutes(10), Duration.ofMinutes(20), Duration.ofMinutes(30),
                IdlePolicy.Action.RELEASE, "TERM", Duration.ofMinutes(5), List.of(), false, List.of());
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofMinutes(5)).withIdle(p), chain)) {
            node.inventory.setTrace(1, UsageTrace.of(Duration.ofSeconds(10), 95)); // the device: 95 % busy
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(1)
                    .shared(MemorySize.ofGibibytes(8)).owner("alice").build());
            node.inventory.setProcessTraces(1, Map.of(JOB_PROCESS, new UsageTrace(Duration.ofSeconds(10),
                    List.of(95.0), List.of(MemorySize.ofGibibytes(6)), List.of())));
            List<IdleAction> steps = node.run(Duration.ofMinutes(1), 60);
            assertThat(steps).as("idle steps against the only holder of GPU 1, busy at 95 % with a process no rule"
                    + " ties to a holder (the Slurm source named its job)")
                    .noneMatch(s -> s.action() == IdleStep.RELEASED);
            assertThat(node.scheduler.allocations()).as("alice's allocation").anyMatch(x -> x.id().equals(a.id()));
        }
    }

    @Test
    void noIdleTimeIsCountedWhileAProcessTiedToNoHolderIsBusy() {
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofSeconds(30)), chain)) {
            node.inventory.setTrace(1, UsageTrace.of(Duration.ofSeconds(10), 95));
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(1)
                    .shared(MemorySize.ofGibibytes(8)).owner("alice").build());
            node.inventory.setProcessTraces(1, Map.of(JOB_PROCESS, new UsageTrace(Duration.ofSeconds(10),
                    List.of(95.0), List.of(MemorySize.ofGibibytes(6)), List.of())));
            node.run(Duration.ofMinutes(1), 5);
            node.scheduler.release(a.id());
            UsageFigures f = AllocationUsage.find(node.store, a.id()).orElseThrow().total();
            assertThat(f.idleMillis()).as("alice's idle ms while a process tied to no holder of the GPU (Slurm job"
                    + " 4242's, by the chained source) ran it at 95 %").isZero();
        }
    }
}
