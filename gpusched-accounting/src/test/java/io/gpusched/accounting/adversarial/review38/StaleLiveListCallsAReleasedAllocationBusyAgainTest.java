package io.gpusched.accounting.adversarial.review38;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.IdleNotice;
import io.gpusched.accounting.IdlePolicy;
import io.gpusched.accounting.IdleStep;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuSample;
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
 * Hosts take the sweep's sample, then read the live list, then call sweep; a release on another thread in between is
 * delivered to the sampler first (onEvent, under its monitor) and the meter ends the allocation, and the sweep's list
 * still names it (the race AccountingSampler.sweep documents; the meter skips such an allocation: {@code tr == null &&
 * ended}). IdleWatch.evaluate is then handed that allocation in {@code live}, with no idle start and not in
 * {@code unmeasured}, and reads it as busy: a warned allocation its owner released herself is audited
 * {@code BUSY_AGAIN} ("busy again: left alone (it was warned at ...)") and she is told "GPUs of ... are busy again".
 * Nothing read her GPU busy; she released it. The docs: BUSY_AGAIN is for an allocation busy again at a sweep, and
 * every record in the store is to be true.
 */
@Tag("adversarial")
class StaleLiveListCallsAReleasedAllocationBusyAgainTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aReleaseBetweenTheListAndTheSweepIsNotBusyAgain() {
        IdlePolicy p = new IdlePolicy(1, Duration.ofMinutes(1), Duration.ofMinutes(2), Duration.ofMinutes(30),
                IdlePolicy.Action.RELEASE, "TERM", Duration.ofMinutes(5), List.of(), false, List.of());
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
            int noticesBefore = node.notices.size();
            node.clock.advance(Duration.ofSeconds(10));
            GpuSample sample = node.inventory.sample(); // the host's order: the sample, then the live list
            List<Allocation> live = node.scheduler.allocations();
            assertThat(node.scheduler.release(a.id())).as("alice releases her allocation").isTrue();
            List<IdleAction> after = new ArrayList<>(node.sampler.sweep(sample, live));
            after.addAll(node.run(Duration.ofSeconds(10), 2));
            List<IdleNotice> notices = new ArrayList<>(node.notices.subList(noticesBefore, node.notices.size()));
            assertThat(after).as("the idle policy's steps at the sweep whose live list was read just before alice"
                    + " released her idle GPU herself (nothing read it busy): %s",
                    after.stream().map(s -> s.action()
                            + " " + s.detail()).toList())
                    .noneMatch(s -> s.action() == IdleStep.BUSY_AGAIN);
            assertThat(notices).as("notices to alice after she released her allocation")
                    .noneMatch(n -> n.step() == IdleStep.BUSY_AGAIN);
        }
    }
}
