package io.gpusched.service.adversarial.output;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.service.ServiceBed;
import io.gpusched.service.ServiceBed.Answer;
import io.gpusched.testing.LocalUsers;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The output one user's ended detached jobs keep in root's state directory is bounded as a whole, not only per job:
 * each job may write up to 64 MiB and 100 ended jobs are kept, so without a per-user budget one user could keep 6.4
 * GiB there. With the budget shrunk to 100,000 bytes, four jobs of 60,000 bytes each: the newest job's output is kept,
 * the older ones' are deleted once over the budget (their records stay and {@code logs} says why), and another user's
 * output is untouched.
 */
@Tag("adversarial")
@Tag("cgroup")
@Timeout(value = 4, unit = TimeUnit.MINUTES)
class OutputBudgetAttackTest {
    @Test
    void oneUsersEndedJobsKeepAtMostTheBudgetOfOutputAndAnothersIsUntouched(@TempDir Path tmp) throws Exception {
        long old = ServiceBed.keepOutputBytes(100_000);
        try (ServiceBed bed = new ServiceBed(tmp, DetachedJobs.config()).jobs()) {
            LocalUsers.User alice = bed.accounts.user("alice");
            LocalUsers.User bob = bed.accounts.user("bob");
            bed.start();
            bed.serve();
            String bobs = DetachedJobs.detach(bed, bob, DetachedJobs.home(tmp, bob), "head -c 60000 /dev/zero")
                    .path("id").asText();
            DetachedJobs.awaitOver(bed, bob, bobs);
            List<String> ids = new ArrayList<>();
            for (int i = 0; i < 4; i++) {
                String id = DetachedJobs.detach(bed, alice, DetachedJobs.home(tmp, alice),
                        "head -c 60000 /dev/zero").path("id").asText();
                DetachedJobs.awaitOver(bed, alice, id);
                ids.add(id);
            }
            // the budget is applied as jobs are made: one more job makes the service look again
            DetachedJobs.detach(bed, alice, DetachedJobs.home(tmp, alice), "true");

            long kept = 0;
            try (Stream<Path> s = Files.list(bed.state.resolve("jobs"))) {
                for (Path f : s.filter(p -> p.getFileName().toString().startsWith("j")).toList()) {
                    String id = f.getFileName().toString().replace(".out", "");
                    if (ids.contains(id)) {
                        kept += Files.size(f);
                    }
                }
            }
            assertThat(kept).as("bytes of alice's ended jobs' output kept").isLessThanOrEqualTo(100_000);
            Answer newest = bed.curl(alice, "http://localhost/api/v1/jobs/" + ids.get(3) + "/logs");
            assertThat(newest.status()).isEqualTo(200);
            assertThat(newest.body()).hasSize(60_000);
            Answer oldest = bed.curl(alice, "http://localhost/api/v1/jobs/" + ids.get(0) + "/logs");
            assertThat(oldest.status()).as(oldest.body()).isBetween(400, 499);
            assertThat(oldest.body()).contains("output was deleted").contains("100000 bytes");
            Answer record = bed.curl(alice, "http://localhost/api/v1/jobs/" + ids.get(0));
            assertThat(record.status()).as("the record stays").isEqualTo(200);
            Answer his = bed.curl(bob, "http://localhost/api/v1/jobs/" + bobs + "/logs");
            assertThat(his.status()).isEqualTo(200);
            assertThat(his.body()).as("bob's output, beside alice's budget").hasSize(60_000);
        } finally {
            ServiceBed.keepOutputBytes(old);
        }
    }
}
