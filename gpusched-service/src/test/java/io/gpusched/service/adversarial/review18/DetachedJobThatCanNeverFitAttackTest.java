package io.gpusched.service.adversarial.review18;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.ServiceBed.Answer;
import io.gpusched.service.adversarial.review10.Clients;
import io.gpusched.testing.LocalUsers;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review18: the fix of review17's "a detached job that can never be served is answered 201 QUEUED and fails after"
 * (commit 74b30b39) checks only the GPU count ({@code FairQueue.enqueue}: {@code request.count() > gpus}). A detached
 * waiting job whose request this node can never serve for another reason (more memory per GPU than any of its GPUs
 * has: 1 TiB on 16 GB V100s; refused {@code INSUFFICIENT_MEMORY}, not a transient reason) is still answered
 * {@code 201 QUEUED}, and the dispatcher's refusal goes to no one: the job just turns FAILED.
 */
@Tag("adversarial")
@Tag("cgroup")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class DetachedJobThatCanNeverFitAttackTest {

    @Test
    void aDetachedWaitingJobAskingMoreMemoryThanAnyGpuHasIsRefusedToItsCaller(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300))).jobs()) {
            LocalUsers.User alice = bed.accounts.user("alice");
            bed.start();
            bed.serve();
            Map<String, Object> m = Clients.jobRequest(Clients.homeOf(tmp, alice), List.of("/bin/true"), "--gpu=1",
                    "--gpu-memory=1024GB");
            m.put("detach", true);
            m.put("wait", "10m");
            Answer a = bed.post(alice, "/api/v1/jobs", Clients.JSON.writeValueAsString(m));
            String later = "";
            if (a.status() == 201) {
                String id = Clients.JSON.readTree(a.body()).path("id").asText();
                for (int i = 0; i < 100; i++) {
                    JsonNode j = Clients.JSON.readTree(bed.curl(alice, "http://localhost/api/v1/jobs/" + id).body());
                    later = j.toString();
                    if (!j.path("state").asText().equals("QUEUED")) {
                        break;
                    }
                    Thread.sleep(100);
                }
            }
            assertThat(a.status()).as("the answer to alice's detached job for 1 TiB GPUs: %s%nthe same job a moment"
                    + " later: %s", a.body(), later).isEqualTo(409);
        }
    }
}
