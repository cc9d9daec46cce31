package io.gpusched.service.adversarial.output;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.ServiceBed.Answer;
import io.gpusched.testing.LocalUsers;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** docs/SERVICE.md: the service keeps the jobs it ran and the last 500 ended ones: one user's flood, another's job. */
@Tag("adversarial")
@Tag("cgroup")
@Timeout(value = 4, unit = TimeUnit.MINUTES)
class JobRecordsFloodAttackTest {
    /**
     * The service keeps "the last 500 ended" jobs for the whole node, not per user: alice submits 501 detached jobs
     * that are refused at once (more GPUs than the node has), each registered and ended, and bob's own detached job,
     * which ended a moment before, is forgotten: bob can no longer read his job or its output through the service
     * ({@code gpusched logs ID}), though his output file is still there. One user's flood erases another's records.
     */
    @Test
    void aFloodOfOneUsersRefusedJobsDoesNotEraseAnotherUsersJob(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, DetachedJobs.config()).jobs()) {
            LocalUsers.User alice = bed.accounts.user("alice");
            LocalUsers.User bob = bed.accounts.user("bob");
            bed.start();
            bed.serve();
            JsonNode job = DetachedJobs.detach(bed, bob, DetachedJobs.home(tmp, bob), "echo bobs-output");
            String id = job.path("id").asText();
            DetachedJobs.awaitOver(bed, bob, id);
            String body = "{\"flags\":[\"--gpu=9\"],\"argv\":[\"/bin/true\"],\"env\":{},\"cwd\":\"/\","
                    + "\"detach\":true}";
            List<String> args = new ArrayList<>(List.of("-X", "POST", "-H", "Content-Type: application/json",
                    "--data-binary", body));
            for (int i = 0; i < 501; i++) {
                args.add("http://localhost/api/v1/jobs");
            }
            Answer flood = bed.curl(alice, args.toArray(String[]::new));
            assertThat(flood.status()).as(flood.body()).isBetween(400, 499);
            Answer mine = bed.curl(bob, "http://localhost/api/v1/jobs/" + id);
            assertThat(mine.status()).as("bob's job %s after alice's flood: %s", id, mine.body()).isEqualTo(200);
            Answer logs = bed.curl(bob, "http://localhost/api/v1/jobs/" + id + "/logs");
            assertThat(logs.body()).isEqualTo("bobs-output\n");
        }
    }
}
