package io.gpusched.accounting.adversarial.review38;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.IdlePolicy;
import io.gpusched.accounting.IdleStatus;
import io.gpusched.accounting.IdleStep;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalDouble;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review36: a sweep in which no GPU of an allocation read busy while one could not be read (no utilization figure)
 * "keeps the policy's state". IdleWatch keeps it, but UsageMeter.credit does not keep its own idle start: the sweep is
 * "not idle" there ({@code tr.idleSince = null}, removed from the idle map), so the next idle sweep starts a new idle
 * start at the unread sweep. That start is what the store's intervals carry ({@code idle}: "when its GPUs went idle")
 * and what {@code gpusched status} and {@code /api/v1/usage/idle} show (IdleStatus.idleFor). After one failed read,
 * alice, idle for 9 minutes and warned (the policy still counts her stretch from the grant and will act on it), is
 * shown as "idle 1 min (warned)": a warning that, by status, came before she was idle for warn_after.
 */
@Tag("adversarial")
class UnreadSweepRestartsTheIdleStartStatusShowsTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void statusKeepsTheIdleStretchAcrossOneUnreadSweep() {
        IdlePolicy p = new IdlePolicy(1, Duration.ofMinutes(1), Duration.ofMinutes(5), Duration.ofMinutes(60),
                IdlePolicy.Action.WARN, "TERM", Duration.ofMinutes(5), List.of(), false, List.of());
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofMinutes(1)).withIdle(p))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0)); // idle all along
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            List<IdleAction> steps = new ArrayList<>();
            for (int i = 0; i < 200 && steps.stream().noneMatch(s -> s.action() == IdleStep.WARNED); i++) {
                steps.addAll(node.run(Duration.ofSeconds(10), 1));
            }
            assertThat(steps).as("alice idle and warned").anyMatch(s -> s.action() == IdleStep.WARNED);
            steps.addAll(node.run(Duration.ofSeconds(10), 18)); // 3 more idle minutes
            node.clock.advance(Duration.ofSeconds(10));
            // one sweep at which the driver returned no utilization for GPU 0 (a transient read failure)
            steps.addAll(node.sweepWith(0, m -> new GpuMetrics(m.index(), OptionalDouble.empty(), m.memoryUsed(),
                    m.temperatureCelsius(), m.powerWatts(), m.sampledAt(), m.energyMillijoules())));
            steps.addAll(node.run(Duration.ofSeconds(10), 8)); // idle, read again; a checkpoint comes meanwhile
            assertThat(node.sampler.idleWatch().warnedAt(a.id())).as("the policy kept alice's warned stretch")
                    .isPresent();
            IdleStatus st = IdleStatus.read(node.store, node.clock.instant()).get(a.id());
            assertThat(st).as("alice's idle status").isNotNull();
            assertThat(st.idleFor()).as("how long status says alice has been idle (%s; idle since %s, as of %s),"
                    + " idle since her grant at %s, warned after %s idle, one sweep's utilization unread",
                    st.describe(), st.idleSince(), st.asOf(), a.createdAt(), p.warnAfter())
                    .isGreaterThanOrEqualTo(p.warnAfter());
        }
    }
}
