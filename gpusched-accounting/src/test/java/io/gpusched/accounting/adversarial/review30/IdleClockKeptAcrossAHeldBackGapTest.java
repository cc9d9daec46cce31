package io.gpusched.accounting.adversarial.review30;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.IdlePolicy;
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
 * An allocation is idle while every GPU of it has a utilization figure at or below the threshold (docs/ACCOUNTING.md,
 * idle policy): time no sampler saw is not idle time, and a restart's gap resets the idle clock (UsageMeter.gap:
 * {@code tr.idleSince = null}). fix28's held-back gap (UsageMeter.observe, a restart's gap over 10 minutes) skips
 * gap(): the track keeps the idle start its store tail carried, so the 30 minutes no sampler ran count as idle.
 * Alice's GPU was idle for 3 minutes before a planned stop of the console; nothing sampled it for the next 30 minutes
 * (her job may have run all along); 6 minutes after the restart she has been seen idle for 9 minutes in all, under
 * warn_after (10 min) and act_after (15 min), yet she is warned at the restart and released 5 minutes later. A
 * restart with a 9-minute gap (written at once, through gap()) does not do this.
 */
@Tag("adversarial")
class IdleClockKeptAcrossAHeldBackGapTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void timeNoSamplerSawDoesNotCountAsIdleAfterALongRestartGap() {
        IdlePolicy p = new IdlePolicy(1, Duration.ofMinutes(1), Duration.ofMinutes(10), Duration.ofMinutes(15),
                IdlePolicy.Action.RELEASE, "TERM", Duration.ofMinutes(5), List.of(), false, List.of());
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofMinutes(1)).withIdle(p))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0)); // idle
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            List<IdleAction> steps = new ArrayList<>(node.run(Duration.ofSeconds(10), 18)); // 3 min idle
            node.stopSampler(); // a planned stop: its last checkpoint carries alice's idle start
            node.clock.advance(Duration.ofMinutes(30)); // the clock is right; nothing samples the GPU
            node.startSampler();
            steps.addAll(node.run(Duration.ofSeconds(10), 36)); // 6 min after the restart
            assertThat(steps).as("idle steps; alice was seen idle 3 min before the stop and 6 min after the restart:"
                    + " %s", steps.stream().map(s -> s.at() + " " + s.action() + " idle " + s.idleFor()).toList())
                    .noneMatch(s -> s.action() == IdleStep.WARNED || s.action() == IdleStep.RELEASED);
            assertThat(node.scheduler.allocations()).as("live allocations").extracting(Allocation::id)
                    .contains(a.id());
        }
    }
}
