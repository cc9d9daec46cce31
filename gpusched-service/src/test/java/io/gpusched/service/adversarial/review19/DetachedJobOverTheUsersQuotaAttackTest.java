package io.gpusched.service.adversarial.review19;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.ServiceSettings;
import io.gpusched.core.UserQuotas;
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
 * Review19: FairQueue.neverServed (review17 and review18's "a detached job that can never be served is answered 201
 * QUEUED and fails after") looks at the node only, not at the user's quota. With {@code gpu.users.max_gpus: 2}, alice's
 * detached waiting job for 4 GPUs can never be served (the scheduler's quota check says so: INVALID_REQUEST "can never
 * be served: ask for 2 or fewer"), yet it is answered 201 QUEUED, and the dispatcher's refusal goes to no one: the job
 * just turns FAILED.
 */
@Tag("adversarial")
@Tag("cgroup")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class DetachedJobOverTheUsersQuotaAttackTest {

    @Test
    void aDetachedWaitingJobForMoreGpusThanTheUsersQuotaIsRefusedToItsCaller(@TempDir Path tmp) throws Exception {
        GpuConfig config = GpuConfig.builder().users(new UserQuotas(2, Map.of(), Map.of())).service(ServiceSettings
                .defaults().withAdminGroup("gsu-nonexistent").withKillGrace(Duration.ofMillis(300))).build();
        try (ServiceBed bed = new ServiceBed(tmp, config).jobs()) {
            LocalUsers.User alice = bed.accounts.user("alice");
            bed.start();
            bed.serve();
            Map<String, Object> m = Clients.jobRequest(Clients.homeOf(tmp, alice), List.of("/bin/true"), "--gpu=4");
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
            assertThat(a.status()).as("the answer to alice's detached job for 4 GPUs, her quota 2: %s%nthe same job a"
                    + " moment later: %s", a.body(), later).isBetween(400, 499);
        }
    }
}
