package io.gpusched.service.adversarial.output;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.service.ServiceBed;
import io.gpusched.testing.LocalUsers;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * docs/SERVICE.md: "A user's ended jobs keep at most 256 MiB of output together". The promise is about what stays on
 * disk once the jobs have ended, not about what is left after somebody makes one more job: a user whose jobs all end
 * (and who then makes no more, on a node nobody else uses) must not keep more than the budget.
 */
@Tag("adversarial")
@Tag("cgroup")
@Timeout(value = 4, unit = TimeUnit.MINUTES)
class OutputBudgetAfterTheEndAttackTest {

    private static long keptOf(Path jobs, List<String> ids) throws Exception {
        long kept = 0;
        for (String id : ids) {
            Path f = jobs.resolve(id + ".out");
            if (Files.exists(f)) {
                kept += Files.size(f);
            }
        }
        return kept;
    }

    @Test
    void endedJobsKeepAtMostTheBudgetWithoutAnotherJobBeingMade(@TempDir Path tmp) throws Exception {
        long old = ServiceBed.keepOutputBytes(100_000);
        try (ServiceBed bed = new ServiceBed(tmp, DetachedJobs.config()).jobs()) {
            LocalUsers.User alice = bed.accounts.user("alice");
            bed.start();
            bed.serve();
            List<String> ids = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                String id = DetachedJobs.detach(bed, alice, DetachedJobs.home(tmp, alice),
                        "head -c 60000 /dev/zero").path("id").asText();
                DetachedJobs.awaitOver(bed, alice, id);
                ids.add(id);
            }
            Path jobs = bed.state.resolve("jobs");
            long kept = keptOf(jobs, ids);
            for (int i = 0; i < 300 && kept > 100_000; i++) { // however the service applies it: 30 s to get there
                Thread.sleep(100);
                kept = keptOf(jobs, ids);
            }
            assertThat(kept).as("bytes of alice's three ended jobs' output kept 30 s after the last ended (budget"
                    + " 100,000), with no job made since").isLessThanOrEqualTo(100_000);
        } finally {
            ServiceBed.keepOutputBytes(old);
        }
    }

    /** Jobs that are all queued or running when each is made, and then all end. */
    @Test
    void jobsThatRanTogetherKeepAtMostTheBudgetOnceEnded(@TempDir Path tmp) throws Exception {
        long old = ServiceBed.keepOutputBytes(100_000);
        try (ServiceBed bed = new ServiceBed(tmp, DetachedJobs.config()).jobs()) {
            LocalUsers.User alice = bed.accounts.user("alice");
            bed.start();
            bed.serve();
            List<String> ids = new ArrayList<>();
            for (int i = 0; i < 4; i++) {
                ids.add(DetachedJobs.detach(bed, alice, DetachedJobs.home(tmp, alice),
                        "sleep 3; head -c 60000 /dev/zero").path("id").asText());
            }
            for (String id : ids) {
                DetachedJobs.awaitOver(bed, alice, id);
            }
            Path jobs = bed.state.resolve("jobs");
            long kept = keptOf(jobs, ids);
            for (int i = 0; i < 300 && kept > 100_000; i++) {
                Thread.sleep(100);
                kept = keptOf(jobs, ids);
            }
            assertThat(kept).as("bytes of alice's four ended jobs' output kept (budget 100,000)")
                    .isLessThanOrEqualTo(100_000);
        } finally {
            ServiceBed.keepOutputBytes(old);
        }
    }
}
