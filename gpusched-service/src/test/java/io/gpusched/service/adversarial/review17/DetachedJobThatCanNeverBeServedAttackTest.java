package io.gpusched.service.adversarial.review17;

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
 * Review17: "A request that can never be served is refused at once" (docs/SERVICE.md, the fair queue). A detached
 * job with a {@code wait} that asks for nine GPUs of an eight-GPU node is answered {@code 201} ("QUEUED", or already
 * FAILED) instead: {@code Jobs.detach} answers before its thread queues the request, and the refusal that follows is
 * told to no one. The same request without {@code detach} is refused with its 4xx.
 */
@Tag("adversarial")
@Tag("cgroup")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class DetachedJobThatCanNeverBeServedAttackTest {

    @Test
    void aWaitingDetachedJobForMoreGpusThanTheNodeHasIsRefusedAtOnce(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300))).jobs()) {
            LocalUsers.User alice = bed.accounts.user("alice");
            bed.start();
            bed.serve();
            Map<String, Object> m = Clients.jobRequest(Clients.homeOf(tmp, alice), List.of("/bin/true"), "--gpu=9");
            m.put("wait", "10m");
            m.put("detach", false);
            Answer attached = bed.post(alice, "/api/v1/jobs", Clients.JSON.writeValueAsString(m));
            m.put("detach", true);
            Answer detached = bed.post(alice, "/api/v1/jobs", Clients.JSON.writeValueAsString(m));
            String later = "";
            if (detached.status() == 201) {
                String id = Clients.JSON.readTree(detached.body()).path("id").asText();
                for (int i = 0; i < 100; i++) {
                    JsonNode j = Clients.JSON.readTree(bed.curl(alice, "http://localhost/api/v1/jobs/" + id).body());
                    later = j.toString();
                    if (!j.path("state").asText().equals("QUEUED")) {
                        break;
                    }
                    Thread.sleep(100);
                }
            }
            assertThat(detached.status()).as("the detached job's answer: %s%nthe same job a moment later: %s%nthe same"
                    + " request attached was answered %d %s", detached.body(), later, attached.status(),
                    attached.body()).isBetween(400, 499);
        }
    }
}
