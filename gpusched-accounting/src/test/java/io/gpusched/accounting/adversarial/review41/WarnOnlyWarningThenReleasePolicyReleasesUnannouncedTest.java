package io.gpusched.accounting.adversarial.review41;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingSettings;
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
 * Under gpu.idle.action = warn the owner is told "nothing more will be done". The admin changes the action to release
 * and restarts the service 30 s later: IdleWatch.resume takes that warning as the release's warning (warnedAt from
 * the WARNED step, whatever action it announced), and the allocation is released at act_after without its owner ever
 * being told it would be ("acted on ... never without a warning first"; the warning says "it will be released in ...
 * unless they get busy").
 */
class WarnOnlyWarningThenReleasePolicyReleasesUnannouncedTest {
    @TempDir
    Path dir;

    @Test
    void aWarningThatPromisedNothingMoreIsNotTheWarningOfARelease() {
        AccountingSettings warnOnly = Review41.settings(Review41.policy(IdlePolicy.Action.WARN, false),
                Duration.ofMinutes(1));
        AccountingSettings release = Review41.settings(Review41.policy(IdlePolicy.Action.RELEASE, false),
                Duration.ofMinutes(1));
        try (AccountingNode node = Review41.node(dir, warnOnly)) {
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("carol").build());
            List<IdleAction> before = node.run(Duration.ofSeconds(10), 6 * 12);
            assertThat(before).filteredOn(x -> x.action() == IdleStep.WARNED).as("%s", Review41.steps(before))
                    .singleElement().satisfies(w -> assertThat(w.detail()).contains("nothing more will be done"));
            Review41.restartWith(node, Duration.ofSeconds(30), release);
            List<IdleAction> after = Review41.runUntilReleased(node, a.id(), 30);
            assertThat(after).extracting(IdleAction::action)
                    .as("carol was told nothing more would be done; before her allocation is released she must be"
                            + " warned that it will be. Steps after the restart: %s", Review41.steps(after))
                    .containsSubsequence(IdleStep.WARNED, IdleStep.RELEASED);
        }
    }
}
