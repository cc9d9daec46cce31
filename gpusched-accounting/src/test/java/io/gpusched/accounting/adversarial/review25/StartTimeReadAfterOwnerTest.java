package io.gpusched.accounting.adversarial.review25;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AllocationUsage;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.MemorySize;
import io.gpusched.core.ProcessAttribution;
import io.gpusched.core.UsageOwner;
import io.gpusched.core.host.AllocationAttribution;
import io.gpusched.core.host.JobCgroups;
import io.gpusched.core.sim.UsageTrace;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * b4813444 remembers whom a process on a shared GPU is charged to while its start time (ProcessAttribution.incarnation)
 * stays the same. UsageMeter asks {@code ownerOf} first (the cgroup read, for the process that has the pid then) and
 * reads the start time afterwards, for the cache ({@code new Attributed(holderIds, o, attribution.incarnation(pid),
 * listed)}). When alice's process exits and bob's next one takes its pid between those two reads of /proc, the owner
 * "alice" is stored under the start time of bob's process: from then on every sweep finds the start time unchanged
 * and charges bob's process to alice, for as long as it runs (the window is small; the error is permanent, and a user
 * can cycle pids to aim at it). Reading the start time before the owner (and checking it again after) closes it. The
 * test runs gpusched's own AllocationAttribution over a scripted /proc and cgroup tree; the pid is taken over right
 * after the first owner lookup returns.
 */
@Tag("adversarial")
class StartTimeReadAfterOwnerTest {
    @TempDir
    Path dir;

    private static final int PID = 4242;

    private static void process(Path proc, int pid, long startTime, String cgroup) {
        try {
            Path p = Files.createDirectories(proc.resolve(Integer.toString(pid)));
            // fields after the command: state (3), ppid (4), 17 more (5 to 21), starttime (22), ...
            Files.writeString(p.resolve("stat"), pid + " (python3) S 1 " + "0 ".repeat(17) + startTime
                    + " 0 0 0\n");
            Files.writeString(p.resolve("cgroup"), "0::" + cgroup + "\n");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aPidTakenOverBetweenTheOwnerAndStartTimeReadsIsNotChargedToTheOldOwnerForEver() throws IOException {
        Path proc = Files.createDirectories(dir.resolve("proc"));
        Path cgroups = Files.createDirectories(dir.resolve("cgroup"));
        String[] bobJob = new String[1];
        AllocationAttribution host = AllocationAttribution.of(proc, cgroups);
        AtomicBoolean takeOver = new AtomicBoolean();
        ProcessAttribution racing = new ProcessAttribution() {
            @Override
            public Optional<UsageOwner> ownerOf(GpuDevice device, int pid, List<Allocation> holders) {
                Optional<UsageOwner> o = host.ownerOf(device, pid, holders);
                if (pid == PID && takeOver.getAndSet(false)) { // alice's process exits; bob's takes its pid now
                    process(proc, PID, 2_000, bobJob[0]);
                }
                return o;
            }

            @Override
            public OptionalLong incarnation(int pid) {
                return host.incarnation(pid);
            }
        };
        try (AccountingNode node = new AccountingNode(dir.resolve("state"), AccountingSettings.defaults()
                .withCheckpoint(Duration.ofSeconds(30)), racing)) {
            node.sweep();
            Allocation alice = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0)
                    .shared(MemorySize.ofGibibytes(4)).owner("alice").build());
            Allocation bob = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0)
                    .shared(MemorySize.ofGibibytes(4)).owner("bob").build());
            // each job's cgroup, as `gpusched run` and the service record it before the job starts
            String aliceJob = "/gpusched.jobs/" + JobCgroups.name(alice.id());
            bobJob[0] = "/gpusched.jobs/" + JobCgroups.name(bob.id());
            node.scheduler.recordJobCgroup(alice.id(), Path.of(cgroups + aliceJob));
            node.scheduler.recordJobCgroup(bob.id(), Path.of(cgroups + bobJob[0]));
            process(proc, PID, 1_000, aliceJob); // alice's process, started at tick 1000
            node.inventory.setProcessTraces(0, Map.of(PID, UsageTrace.of(Duration.ofSeconds(10), 40)));
            takeOver.set(true);
            node.run(Duration.ofSeconds(10), 1); // alice's process, 40 % for 10 s; then the pid is bob's
            node.run(Duration.ofSeconds(10), 5); // bob's process, 40 % for 50 s
            node.sampler.checkpoint();

            double ofBob = AllocationUsage.find(node.store, bob.id()).orElseThrow().total()
                    .utilizationPercentMillis();
            double ofAlice = AllocationUsage.find(node.store, alice.id()).orElseThrow().total()
                    .utilizationPercentMillis();
            assertThat(ofBob).as("bob's utilization x ms: his process (pid %d, started at tick 2000, in his job's"
                    + " cgroup) at 40 %% for the last 50 s; alice was charged %s", PID, ofAlice)
                    .isEqualTo(40.0 * 50_000);
        }
    }
}
