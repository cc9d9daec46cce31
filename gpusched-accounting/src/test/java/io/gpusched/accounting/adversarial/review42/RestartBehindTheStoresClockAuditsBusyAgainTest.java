package io.gpusched.accounting.adversarial.review42;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.IdleNotice;
import io.gpusched.accounting.IdlePolicy;
import io.gpusched.accounting.IdleStep;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A sampler restarted while the clock is behind the store's last checkpoint (the previous sampler ran on a clock
 * ahead, NTP stepped it back while it was down: ACCOUNTING.md's RTC case) resumes the warned stretch, but its meter
 * credits nothing until the clock passes the resumed tail, so its first sweeps report the allocation neither idle
 * nor unmeasured: the resumed policy takes that as busy, audits BUSY_AGAIN, tells the holder "busy again" and drops
 * the warning, though no GPU read busy. A policy never restarted judges nothing while the clock is behind a sweep
 * already judged ("an idle start after the sweep's time ... is not busy again: the state is kept and nothing is
 * audited"). The GPU stays idle all along.
 */
class RestartBehindTheStoresClockAuditsBusyAgainTest {
    @TempDir
    Path dir;

    @Test
    void aRestartOnAClockSteppedBackIsNotBusyAgain() {
        IdlePolicy p = Review42.policy(Duration.ofMinutes(10), Duration.ofMinutes(20), Duration.ofMinutes(8));
        try (AccountingNode node = Review42.node(dir, Duration.ofMinutes(1), p)) {
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("carol").build());
            List<IdleAction> before = node.run(Duration.ofSeconds(10), 6 * 12); // 12 min idle: warned at 10
            assertThat(before).extracting(IdleAction::action).as("%s", Review42.steps(before))
                    .contains(IdleStep.WARNED);
            node.stopSampler();
            node.clock.set(node.clock.instant().minus(Duration.ofMinutes(2))); // stepped back while down
            node.startSampler();
            int noticesBefore = node.notices.size();
            List<IdleAction> after = node.run(Duration.ofSeconds(10), 6 * 3); // 3 min: passes the old tail
            assertThat(after).extracting(IdleAction::action)
                    .as("the GPU never read busy; the clock behind the last sweep judged measures nothing, so nothing"
                            + " is busy again and the warning stands. After the restart:%s", Review42.steps(after))
                    .doesNotContain(IdleStep.BUSY_AGAIN, IdleStep.WARNED);
            List<IdleNotice> sent = node.notices.subList(noticesBefore, node.notices.size());
            assertThat(sent).as("no 'busy again' notice to the holder of an idle GPU: %s", sent)
                    .noneMatch(n -> n.step() == IdleStep.BUSY_AGAIN);
            assertThat(node.sampler.idleWatch().warnedAt(a.id())).as("the warning still counts").isPresent();
        }
    }
}
