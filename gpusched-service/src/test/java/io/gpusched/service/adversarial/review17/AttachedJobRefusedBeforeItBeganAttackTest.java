package io.gpusched.service.adversarial.review17;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.service.ServiceBed;
import io.gpusched.service.ServiceBed.Answer;
import io.gpusched.service.adversarial.review10.Clients;
import io.gpusched.testing.LocalUsers;
import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
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
            Answer full = bed.curl(null, "-X", "POST", "-H", "Content-Type: application/json", "--data-binary",
                    "{\"flags\":[\"--gpu=8\"]}", "http://localhost/api/v1/allocations");
            assertThat(full.status()).as(full.body()).isEqualTo(201);
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("flags", List.of("--gpu=1"));
            m.put("argv", List.of("/bin/true"));
            m.put("env", Map.of("PATH", "/usr/bin:/bin"));
            m.put("cwd", Clients.homeOf(tmp, alice).toString());
            Answer a = bed.curl(alice, "-X", "POST", "-H", "Content-Type: application/json", "--data-binary",
                    Clients.JSON.writeValueAsString(m), "http://localhost/api/v1/jobs");
            assertThat(a.status()).as("status of the refused attached job; its body: [%s]", a.body()).isEqualTo(409);
            assertThat(a.body()).contains("INSUFFICIENT_GPUS");
        }
    }
}
