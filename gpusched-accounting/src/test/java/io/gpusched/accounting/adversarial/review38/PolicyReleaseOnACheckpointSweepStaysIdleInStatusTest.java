package io.gpusched.accounting.adversarial.review38;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.IdlePolicy;
import io.gpusched.accounting.IdleStatus;
import io.gpusched.accounting.IdleStep;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The policy's release happens inside {@code AccountingSampler.sweep} (IdleWatch.act, effects.release, the scheduler's
 * release, the sampler's onEvent on the same thread). onEvent writes the allocation's last interval ({@code [now,
 * now]}, end RELEASED) at once, while the sweep's own records, queued in a local list and written only after the policy
 * ran, still hold the checkpoint's interval of that allocation up to the same {@code now}, open and idle. In the store
 * the open interval comes after the ended one with the same {@code to}; IdleStatus.read keeps the later one on a tie
 * ({@code b.to().isBefore(a.to()) ? a : b}), so an allocation the policy released on a checkpoint sweep is listed as
 * idle, "idle 4 min (released)", in {@code /api/v1/usage/idle} (UsageHandler does not filter by live allocations) for
 * two days. AccountingStore.recover breaks the same tie toward the ended interval; IdleStatus does not. With the
 * console's 1-s sweeps and 60-s checkpoints, one policy release in sixty.
 */
@Tag("adversarial")
class PolicyReleaseOnACheckpointSweepStaysIdleInStatusTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void anAllocationThePolicyReleasedIsNotListedAsIdle() {
        IdlePolicy p = new IdlePolicy(1, Duration.ofMinutes(1), Duration.ofMinutes(2), Duration.ofMinutes(4),
                IdlePolicy.Action.RELEASE, "TERM", Duration.ofMinutes(1), List.of(), false, List.of());
        // a checkpoint every sweep: the release lands on a checkpoint sweep, as one in sixty does with the defaults
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofSeconds(10)).withIdle(p))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0)); // idle all along
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            List<IdleAction> steps = new ArrayList<>();
            for (int i = 0; i < 200 && steps.stream().noneMatch(s -> s.action() == IdleStep.RELEASED); i++) {
                steps.addAll(node.run(Duration.ofSeconds(10), 1));
            }
            assertThat(steps).as("the policy released alice").anyMatch(s -> s.action() == IdleStep.RELEASED);
            assertThat(node.scheduler.allocations()).as("live after the policy's release")
                    .noneMatch(x -> x.id().equals(a.id()));
            steps.addAll(node.run(Duration.ofSeconds(10), 3)); // the node goes on sweeping
            Map<String, IdleStatus> status = IdleStatus.read(node.store, node.clock.instant());
            assertThat(status).as("idle status (what /api/v1/usage/idle lists) after the policy released %s on a"
                    + " checkpoint sweep; it says: %s", a.id(),
                    status.containsKey(a.id())
                            ? status.get(a.id()).describe() : "-")
                    .doesNotContainKey(a.id());
        }
    }
}
