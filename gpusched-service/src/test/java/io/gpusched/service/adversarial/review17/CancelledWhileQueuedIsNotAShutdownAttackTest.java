package io.gpusched.service.adversarial.review17;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.service.ServiceBed;
import io.gpusched.service.ServiceBed.Answer;
import io.gpusched.service.adversarial.review10.Clients;
import io.gpusched.testing.LocalUsers;
import java.nio.charset.StandardCharsets;
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
 * Review17: every refusal is typed (issue 33). An attached job that waits for GPUs and is cancelled while it waits (by
 * its owner, from another terminal, or by an admin) is answered, on its client's stream, with reason
 * {@code SHUTTING_DOWN} ("503 SHUTTING_DOWN" is the service's stop, docs/SERVICE.md) although the service runs on:
 * {@code ServiceRoutes.start} turns every job that did not get its allocation into a {@code FairQueue.Dropped}, which
 * {@code ServiceExchanges.error} maps to 503 SHUTTING_DOWN. A client (the command, a script that retries after a
 * restart) is told the node service is stopping.
 */
@Tag("adversarial")
@Tag("cgroup")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class CancelledWhileQueuedIsNotAShutdownAttackTest {

    @Test
    void aWaitingAttachedJobCancelledByItsOwnerIsNotToldTheServiceIsStopping(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300))).jobs()) {
            LocalUsers.User alice = bed.accounts.user("alice");
            bed.start();
            bed.serve();
            Answer full = bed.post(null, "/api/v1/allocations", "{\"flags\":[\"--gpu=8\"]}");
            assertThat(full.status()).as(full.body()).isEqualTo(201);

            Map<String, Object> m = Clients.jobRequest(Clients.homeOf(tmp, alice), List.of("/bin/true"), "--gpu=1");
            m.put("wait", "2m");
            Process client = Clients.attached(bed, alice, Clients.JSON.writeValueAsString(m));
            try {
                String id = null;
                for (int i = 0; i < 600 && id == null; i++) {
                    if (!bed.service.queueView().isEmpty()) {
                        for (Map<String, Object> j : bed.service.jobViews(ServiceBed.root())) {
                            if ("QUEUED".equals(j.get("state"))) {
                                id = (String) j.get("id");
                            }
                        }
                    }
                    Thread.sleep(50);
                }
                assertThat(id).as("alice's job waits in the queue").isNotNull();
                Answer cancel = bed.curl(alice, "-X", "DELETE", "http://localhost/api/v1/jobs/" + id);
                assertThat(cancel.status()).as(cancel.body()).isEqualTo(200);

                String stream = new String(Clients.readAll(client, 60), StandardCharsets.UTF_8);
                assertThat(bed.service.queueView()).isEmpty();
                assertThat(stream).as("what alice's client was told, the service running on").isNotBlank()
                        .doesNotContain("SHUTTING_DOWN").doesNotContain("is stopping");
            } finally {
                client.destroyForcibly();
            }
        }
    }
}
