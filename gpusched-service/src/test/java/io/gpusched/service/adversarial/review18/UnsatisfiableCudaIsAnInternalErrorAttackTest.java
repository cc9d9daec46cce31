package io.gpusched.service.adversarial.review18;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.AllocationEvent;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.ServiceBed.Answer;
import io.gpusched.service.adversarial.review10.Clients;
import io.gpusched.testing.LocalUsers;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review18: every refusal is typed (issue 33). A job whose {@code cuda} requirement is well-formed but that no CUDA
 * installation of the node satisfies ({@code "9.0"}: exactly CUDA 9.0) passes {@code Jobs.prepare} (which only parses
 * it), is granted its GPUs, and is refused in {@code Jobs.run} by {@code CudaEnvironmentResolver.resolve} with a
 * {@code CudaResolutionException}: a {@code GpuException} that {@code ServiceExchanges.error} does not know, so the
 * caller gets {@code 500 INTERNAL} (and the service logs a stack trace at WARN for a user's ordinary mistake), after a
 * grant it did not need.
 */
@Tag("adversarial")
@Tag("cgroup")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class UnsatisfiableCudaIsAnInternalErrorAttackTest {

    @Test
    void aJobAskingForACudaTheNodeDoesNotHaveIsATypedRefusal(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300))).jobs()) {
            LocalUsers.User alice = bed.accounts.user("alice");
            bed.start();
            bed.serve();
            Map<String, Object> m = Clients.jobRequest(Clients.homeOf(tmp, alice), List.of("/bin/true"), "--gpu=1");
            m.put("cuda", "9.0");
            AtomicInteger grants = new AtomicInteger();
            bed.scheduler.addListener(e -> {
                if (e.type() == AllocationEvent.Type.ALLOCATED) {
                    grants.incrementAndGet();
                }
            });
            Answer a = bed.post(alice, "/api/v1/jobs", Clients.JSON.writeValueAsString(m));
            assertThat(a.status()).as("the answer to alice's job asking for exactly CUDA 9.0: %s", a.body()).isIn(400,
                    409);
            assertThat(a.body()).doesNotContain("INTERNAL").contains("NO_MATCHING_CUDA");
            assertThat(grants.get()).as("GPUs granted for a job no CUDA of the node can serve").isZero();
        }
    }
}
