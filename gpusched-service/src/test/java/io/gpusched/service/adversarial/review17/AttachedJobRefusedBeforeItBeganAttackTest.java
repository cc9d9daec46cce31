package io.gpusched.service.adversarial.review17;

import static org.assertj.core.api.Assertions.assertThat;

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
 * Review17: "A refusal before the job waits or starts is an ordinary error answer" (docs/SERVICE.md, Jobs). An
 * attached job that does not wait, on a node whose eight GPUs are all held, is answered {@code 200} with an empty body:
 * no status, no reason, no {@code error} line. In {@code ServiceRoutes.start} the refusal from
 * {@code Jobs.allocate} is rethrown (the stream has not begun), but the {@code finally} runs {@code sink.close()} first,
 * which closes the exchange before anything was sent, and the transport answers that with an empty {@code 200}; the
 * {@code ServiceExchanges.fail} of the route's guard then has no answer left to give.
 */
@Tag("adversarial")
@Tag("cgroup")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class AttachedJobRefusedBeforeItBeganAttackTest {

    @Test
    void anAttachedJobOnAFullNodeIsAnswered409InsufficientGpus(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300))).jobs()) {
            LocalUsers.User alice = bed.accounts.user("alice");
            bed.start();
            bed.serve();
            Answer full = bed.post(null, "/api/v1/allocations", "{\"flags\":[\"--gpu=8\"]}");
            assertThat(full.status()).as(full.body()).isEqualTo(201);
            Map<String, Object> m = Clients.jobRequest(Clients.homeOf(tmp, alice), List.of("/bin/true"), "--gpu=1");
            Answer a = bed.post(alice, "/api/v1/jobs", Clients.JSON.writeValueAsString(m));
            assertThat(a.status()).as("status of the refused attached job; its body: [%s]", a.body()).isEqualTo(409);
            assertThat(a.body()).contains("INSUFFICIENT_GPUS");
        }
    }
}
