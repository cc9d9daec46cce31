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
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * "Time no sweep saw is not idle time": after a suspended host the meter starts the idle clock over and the policy
 * audits STARTED_OVER. But UsageMeter.gap closes the gap interval(s) before it clears {@code tr.idleSince}, so the
 * gap record (time not sampled) carries the old idle start as its {@code idle} field ("when its GPUs went idle, if
 * idle at {@code to}"). Until the next checkpoint that gap is alice's latest interval, and `gpusched status` /
 * {@code /api/v1/usage/idle} report her idle for the 3 hours the host was suspended ("idle 3.0 h"), the very time the
 * meter and the policy refuse to count. The same for the restart gap a restarted sampler writes at its first sweep.
 */
@Tag("adversarial")
class GapRecordCarriesTheOldIdleStartTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void statusDoesNotCountTheSuspensionAsIdle() {
        IdlePolicy p = new IdlePolicy(1, Duration.ofMinutes(1), Duration.ofMinutes(2), Duration.ofMinutes(30),
                IdlePolicy.Action.RELEASE, "TERM", Duration.ofMinutes(5), List.of(), false, List.of());
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofMinutes(10)).withIdle(p))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0)); // idle all along
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            List<IdleAction> steps = new ArrayList<>();
            for (int i = 0; i < 200 && steps.stream().noneMatch(s -> s.action() == IdleStep.WARNED); i++) {
                steps.addAll(node.run(Duration.ofSeconds(10), 1));
            }
            assertThat(steps).as("alice idle and warned").anyMatch(s -> s.action() == IdleStep.WARNED);
            node.clock.advance(Duration.ofHours(3)); // the host is suspended for 3 h
            steps.addAll(node.sweep()); // skipped: the clock is far ahead of the last sweep
            steps.addAll(node.run(Duration.ofSeconds(10), 1)); // the clock stays: the 3 h are written as a gap
            assertThat(steps).as("the policy started alice's stretch over")
                    .anyMatch(s -> s.action() == IdleStep.STARTED_OVER);
            IdleStatus st = IdleStatus.read(node.store, node.clock.instant()).get(a.id());
            // (the fix: the gap records carry no idle start, so until the next checkpoint writes her new stretch,
            // status does not list her as idle at all; "as of its last checkpoint" she was not known idle)
            if (st == null) {
                return;
            }
            assertThat(st.idleFor()).as("how long status says alice has been idle 10 s after a 3-h suspension (%s;"
                    + " idle since %s, as of %s): time no sweep saw is not idle time", st.describe(),
                    st.idleSince(), st.asOf())
                    .isLessThan(Duration.ofHours(1));
        }
    }
}
