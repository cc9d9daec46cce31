package io.gpusched.accounting.adversarial.review40;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AllocationUsage;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.HolderProcess;
import io.gpusched.core.MemorySize;
import io.gpusched.core.ProcessAttribution;
import io.gpusched.core.UsageOwner;
import io.gpusched.core.host.AllocationAttribution;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review 40, the meter's side of {@code SameTickPidReuseTest} (gpu-core): on a shared GPU, UsageMeter keeps whom a
 * pid is charged to while {@code AllocationAttribution.host().incarnation(pid)} stays the same (review25). The
 * incarnation is the start time in clock ticks; the kept {@code /proc/<pid>/oom_score_adj} handle sees alice's process
 * reaped, yet when bob's process takes the pid in the same tick the same token comes back, so every sweep charges
 * bob's process to alice for as long as it runs.
 *
 * <p>Real processes ({@code sleep}), the pid reuse forced through {@code /proc/sys/kernel/ns_last_pid} (root). A try
 * counts only when the new process got the pid and, read in {@code /proc}, started in the same tick as the old one;
 * skipped when no try did.
 */
@Tag("adversarial")
class SameTickPidReuseChargedToOldOwnerTest {
    private static final Path NS_LAST_PID = Path.of("/proc/sys/kernel/ns_last_pid");

    @TempDir
    Path dir;

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void bobsProcessOnAlicesReusedPidIsChargedToBob() throws Exception {
        assumeTrue(Files.isReadable(Path.of("/proc/self/oom_score_adj")), "skipped: no procfs at /proc");
        assumeTrue(Files.isWritable(NS_LAST_PID) && "root".equals(System.getProperty("user.name")),
                "skipped: forcing a pid's reuse needs root (write /proc/sys/kernel/ns_last_pid)");
        assumeTrue(Files.isExecutable(Path.of("/bin/sleep")) || Files.isExecutable(Path.of("/usr/bin/sleep")),
                "skipped: no sleep binary");
        Map<Integer, String> owners = new ConcurrentHashMap<>(); // pid -> allocation: who started the process
        AllocationAttribution host = AllocationAttribution.host();
        ProcessAttribution attribution = new ProcessAttribution() {
            @Override
            public Optional<UsageOwner> ownerOf(GpuDevice device, int pid, List<Allocation> holders) {
                return Optional.ofNullable(owners.get(pid)).map(UsageOwner::allocation);
            }

            @Override
            public OptionalLong incarnation(int pid) {
                return host.incarnation(pid); // the change under review: kept handles on the real /proc
            }
        };
        try (AccountingNode node = new AccountingNode(dir.resolve("state"), AccountingSettings.defaults(),
                attribution)) {
            Allocation alice = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0)
                    .shared(MemorySize.ofGibibytes(4)).owner("alice").build());
            Allocation bob = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0)
                    .shared(MemorySize.ofGibibytes(4)).owner("bob").build());
            node.run(Duration.ofSeconds(10), 3); // warm up
            for (int attempt = 0; attempt < 400; attempt++) {
                Process x = new ProcessBuilder("sleep", "60").start(); // alice's process
                Process y = null;
                try {
                    int pid = (int) x.pid();
                    owners.put(pid, alice.id());
                    node.inventory.setProcessTraces(0, Map.of(pid, UsageTrace.of(Duration.ofSeconds(10), 40)));
                    node.run(Duration.ofSeconds(10), 1); // the meter attributes pid to alice, under x's start time
                    OptionalLong xStart = HolderProcess.startTime(pid, Path.of("/proc"));
                    x.destroyForcibly();
                    assertThat(x.waitFor(10, TimeUnit.SECONDS)).isTrue(); // x reaped
                    Files.writeString(NS_LAST_PID, Integer.toString(pid - 1));
                    y = new ProcessBuilder("sleep", "60").start(); // bob's process
                    OptionalLong yStart = HolderProcess.startTime(y.pid(), Path.of("/proc"));
                    if (y.pid() != pid || xStart.isEmpty() || !xStart.equals(yStart)) {
                        // not the same pid, or a later tick: forget this pid and try again
                        owners.remove(pid);
                        node.inventory.setProcessTraces(0, Map.of());
                        node.run(Duration.ofSeconds(10), 1);
                        continue;
                    }
                    owners.put(pid, bob.id()); // the pid is bob's process now
                    double aliceBefore = utilization(node, alice);
                    double bobBefore = utilization(node, bob);
                    node.run(Duration.ofSeconds(10), 5); // bob's process at 40 % for 50 s (revalidated after 10 s)
                    node.sampler.checkpoint();
                    double ofBob = utilization(node, bob) - bobBefore;
                    double ofAlice = utilization(node, alice) - aliceBefore;
                    assertThat(ofBob).as("pid %d: alice's process (started at tick %d) was reaped and bob's took its"
                            + " pid in the same tick; bob's process ran at 40 %% for 50 s, so bob's utilization x ms"
                            + " must grow by %s, but alice's grew by %s (the incarnation, the start time, was the"
                            + " same for both processes)", pid, xStart.getAsLong(), 40.0 * 50_000, ofAlice)
                            .isEqualTo(40.0 * 50_000);
                    return;
                } finally {
                    x.destroyForcibly();
                    if (y != null) {
                        y.destroyForcibly();
                        y.waitFor(10, TimeUnit.SECONDS);
                    }
                }
            }
            assumeTrue(false, "skipped: no pid was reused within one clock tick in 400 tries");
        }
    }

    private static double utilization(AccountingNode node, Allocation a) {
        node.sampler.checkpoint();
        return AllocationUsage.find(node.store, a.id()).map(u -> u.total().utilizationPercentMillis()).orElse(0.0);
    }
}
