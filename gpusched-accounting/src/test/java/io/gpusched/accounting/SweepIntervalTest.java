package io.gpusched.accounting;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code gpu.accounting.interval}: a host that sweeps every second (the console's tick) offers each sweep
 * ({@link AccountingSampler#offer}); one is credited every interval, covering the time since the last with its figures.
 */
class SweepIntervalTest {
    @TempDir
    Path dir;
    ScriptedNode node;

    @AfterEach
    void close() {
        if (node != null) {
            node.close();
        }
    }

    private void open(AccountingSettings s) {
        node = new ScriptedNode(dir, s);
        node.trace(0, UsageTrace.of(Duration.ofSeconds(10), 50));
    }

    /** Offers a sweep every second for {@code seconds}; returns the idle steps taken. */
    private List<IdleAction> offer(int seconds) {
        List<IdleAction> steps = new ArrayList<>();
        for (int i = 0; i < seconds; i++) {
            node.clock.advance(Duration.ofSeconds(1));
            steps.addAll(node.sampler.offer(node.inventory.sample(), node.scheduler.allocations()));
        }
        return steps;
    }

    private UsageFigures releasedAfter(int seconds) {
        node.sampler.offer(node.inventory.sample(), node.scheduler.allocations());
        Allocation a = node.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
        offer(seconds);
        node.scheduler.release(a.id());
        return AllocationUsage.find(node.store, a.id()).orElseThrow().total();
    }

    @Test
    void aSweepIsCreditedEveryIntervalAndHeldTimeStaysExact() {
        open(AccountingSettings.defaults().withInterval(Duration.ofSeconds(10)));
        UsageFigures f = releasedAfter(35);
        assertThat(f.heldMillis()).as("held: grant to release, whatever the interval").isEqualTo(35_000);
        assertThat(f.measuredMillis()).as("credited at 10, 20 and 30 s (each covering the 10 s before it); the 5 s"
                + " after the last credited sweep are held, not measured").isEqualTo(30_000);
        assertThat(f.meanUtilization()).hasValue(50.0);
    }

    @Test
    void anIntervalOfOneSecondCreditsEverySweep() {
        open(AccountingSettings.defaults().withInterval(Duration.ofSeconds(1)));
        UsageFigures f = releasedAfter(35);
        assertThat(f.heldMillis()).isEqualTo(35_000);
        assertThat(f.measuredMillis()).isEqualTo(35_000);
    }

    @Test
    void aCheckpointShorterThanTheIntervalShortensIt() {
        open(AccountingSettings.defaults().withInterval(Duration.ofSeconds(30)).withCheckpoint(Duration.ofSeconds(5)));
        UsageFigures f = releasedAfter(12);
        assertThat(f.measuredMillis()).as("credited every 5 s: at 5 and 10 s").isEqualTo(10_000);
    }

    @Test
    void aClockSteppedBackIsCreditedAtOnce() {
        open(AccountingSettings.defaults().withInterval(Duration.ofSeconds(10)));
        node.sampler.offer(node.inventory.sample(), node.scheduler.allocations());
        Allocation a = node.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
        offer(10); // credited at 10 s
        node.clock.advance(Duration.ofSeconds(3));
        node.sampler.offer(node.inventory.sample(), node.scheduler.allocations()); // 13 s: not due
        node.clock.advance(Duration.ofSeconds(-2));
        // 11 s: behind the sweep offered before it, so credited (the meter judges the step back, as for any sweep)
        node.sampler.offer(node.inventory.sample(), node.scheduler.allocations());
        node.scheduler.release(a.id());
        UsageFigures f = AllocationUsage.find(node.store, a.id()).orElseThrow().total();
        assertThat(f.measuredMillis()).as("the sweep at 11 s was credited: 1 s more than the one at 10 s")
                .isEqualTo(11_000);
    }

    @Test
    void theIdlePolicyActsAtMostAnIntervalLate() {
        IdlePolicy p = new IdlePolicy(1, Duration.ofMinutes(1), Duration.ofMinutes(2), Duration.ofMinutes(3),
                IdlePolicy.Action.RELEASE, "TERM", Duration.ofMinutes(1), List.of(), false, List.of());
        open(AccountingSettings.defaults().withInterval(Duration.ofSeconds(10)).withIdle(p));
        node.trace(0, UsageTrace.of(Duration.ofSeconds(10), 0));
        node.sampler.offer(node.inventory.sample(), node.scheduler.allocations());
        Instant granted = node.clock.instant();
        node.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
        List<IdleAction> steps = offer(240);
        assertThat(steps).extracting(IdleAction::action).containsExactly(IdleStep.FLAGGED, IdleStep.WARNED,
                IdleStep.RELEASED);
        for (IdleAction s : steps) {
            long at = Duration.between(granted, s.at()).toSeconds();
            long due = switch (s.action()) {
                case FLAGGED -> 60;
                case WARNED -> 120;
                default -> 180;
            };
            assertThat(at).as(s.action() + " at " + at + " s, due at " + due + " s").isBetween(due, due + 10);
        }
        assertThat(node.scheduler.allocations()).isEmpty();
    }
}
