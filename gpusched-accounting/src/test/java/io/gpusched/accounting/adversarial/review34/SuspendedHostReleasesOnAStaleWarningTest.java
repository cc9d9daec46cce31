package io.gpusched.accounting.adversarial.review34;

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
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Idle allocations are "warned, then acted on", "never without a warning first", and busy again "its clock starts
 * over" (IdleWatch; docs/ACCOUNTING.md). Time no sweep saw is not idle: after sweeps far apart (a suspended host, 3 h)
 * the meter writes the span as a "gap" and starts the allocation's idle clock over (UsageMeter.gap:
 * {@code tr.idleSince = null}; the next idle start is the resume). IdleWatch is not told: the sampler's skipped sweep
 * never reaches {@code evaluate}, and the next one has an idle start again, so alice's state (flagged, warned 3 h ago,
 * grace spent) is kept while her idle time starts from zero ({@code min(wall, observed)}). When the new idle stretch
 * reaches act_after she is released with no warning for it: the only one she got is from before the suspension ("it
 * will be released in 5 min unless they get busy"), for an idle stretch the meter itself ended.
 */
@Tag("adversarial")
class SuspendedHostReleasesOnAStaleWarningTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void anIdleStretchAfterASuspendedHostIsWarnedBeforeItIsActedOn() {
        IdlePolicy p = new IdlePolicy(1, Duration.ofMinutes(1), Duration.ofMinutes(10), Duration.ofMinutes(15),
                IdlePolicy.Action.RELEASE, "TERM", Duration.ofMinutes(5), List.of(), false, List.of());
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofMinutes(1)).withIdle(p))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0)); // idle
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            List<IdleAction> steps = new ArrayList<>();
            for (int i = 0; i < 200 && steps.stream().noneMatch(s -> s.action() == IdleStep.WARNED); i++) {
                steps.addAll(node.run(Duration.ofSeconds(10), 1));
            }
            assertThat(steps).as("idle steps before the suspension").anyMatch(s -> s.action() == IdleStep.WARNED);
            steps.addAll(node.run(Duration.ofSeconds(10), 6)); // one more minute, then the host is suspended
            assertThat(steps).as("idle steps before the suspension").noneMatch(s -> s.action() == IdleStep.RELEASED);
            node.clock.advance(Duration.ofHours(3)); // resumed 3 h later
            List<IdleAction> after = new ArrayList<>(node.sweep());
            after.addAll(node.run(Duration.ofSeconds(10), 1));
            Instant idleSince = node.sampler.idleSince().get(a.id());
            Instant resumed = node.clock.instant().minusSeconds(20);
            assertThat(idleSince).as("the meter's idle start after the gap").isNotNull().isAfterOrEqualTo(resumed);
            for (int i = 0; i < 120
                    && node.scheduler.allocations().stream().anyMatch(x -> x.id().equals(a.id())); i++) {
                after.addAll(node.run(Duration.ofSeconds(10), 1));
            }
            int released = indexOf(after, IdleStep.RELEASED);
            int warned = indexOf(after, IdleStep.WARNED);
            assertThat(released < 0 || (warned >= 0 && warned < released)).as("after the 3-h suspension (the meter's"
                    + " idle start is %s, after it), alice was released without a warning for that idle stretch: %s",
                    idleSince, after.stream().map(s -> s.at() + " " + s.action() + " " + s.detail()).toList())
                    .isTrue();
        }
    }

    private static int indexOf(List<IdleAction> steps, IdleStep step) {
        for (int i = 0; i < steps.size(); i++) {
            if (steps.get(i).action() == step) {
                return i;
            }
        }
        return -1;
    }
}
