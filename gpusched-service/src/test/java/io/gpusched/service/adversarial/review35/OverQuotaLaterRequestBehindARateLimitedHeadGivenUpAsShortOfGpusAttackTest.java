package io.gpusched.service.adversarial.review35;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuAllocationException.Reason;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.ServiceSettings;
import io.gpusched.core.UserQuotas;
import io.gpusched.server.Caller;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.adversarial.review10.Clients;
import io.gpusched.service.adversarial.review10.Queued;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review35: FairQueue.backfillBehind skips every later request of a user whose head was last refused RATE_LIMITED,
 * before the quota-first check (3e115e83) is reached, so such a request is never marked over its quota. Alice
 * (max_gpus 3, rate limit burst 2) holds 2 GPUs from two grants (no token left); her head (1 GPU, within the quota) is
 * refused RATE_LIMITED; her later 2-GPU request (2 + 2 over 3) is never looked at, and when its wait runs out it is
 * refused INSUFFICIENT_GPUS, "gave up after waiting", on a node with 6 of 8 GPUs idle. SERVICE.md: "a waiting request
 * over its owner's quota that runs out of time is refused QUOTA_EXCEEDED, naming the limit ... on a full node too";
 * refusals are to be true. Same cause as StaleQuotaRefusalBehindARateLimitedHeadAttackTest.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class OverQuotaLaterRequestBehindARateLimitedHeadGivenUpAsShortOfGpusAttackTest {

    @Test
    void anOverQuotaLaterRequestIsNotGivenUpAsShortOfGpus(@TempDir Path tmp) throws Exception {
        GpuConfig config = GpuConfig.builder().users(new UserQuotas(3, Map.of(), Map.of())).rateLimit(0.01, 2)
                .service(ServiceSettings.defaults().withAdminGroup("gsu-nonexistent")
                        .withKillGrace(Duration.ofMillis(300)))
                .build();
        try (ServiceBed bed = new ServiceBed(tmp, config)) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice35b", 63532, false);
            Allocation a1 = s.allocate(alice, GpuRequests.fromCliFlags(List.of("--gpu=1")), Optional.empty(),
                    () -> false);
            Allocation a2 = s.allocate(alice, GpuRequests.fromCliFlags(List.of("--gpu=1")), Optional.empty(),
                    () -> false);
            try (Queued head = Queued.queue(s, alice, "--gpu=1");
                 Queued later = Queued.queue(s, alice, Duration.ofSeconds(4), "--gpu=2")) {
                assertThat(Clients.await(later.result::isDone, 60)).as("the later request's 4 s wait ran out").isTrue();
                Throwable why = null;
                try {
                    later.result.join();
                } catch (CompletionException e) {
                    why = e.getCause();
                }
                assertThat(why).as("alice holds 2 of 3: her 2-GPU request is over her quota").isInstanceOf(
                        GpuAllocationException.class);
                GpuAllocationException g = (GpuAllocationException) why;
                long idle = s.scheduler().devices().stream().filter(d -> d.isIdle()).count();
                assertThat(g.reason()).as("alice holds 2 GPUs of her quota of 3, %d of the node's GPUs are idle; her"
                        + " later 2-GPU request's refusal when its wait ran out: %s (the head: %s)", idle,
                        g.getMessage(), head.result).isIn(Reason.QUOTA_EXCEEDED, Reason.RATE_LIMITED);
            } finally {
                s.release(alice, a1.id());
                s.release(alice, a2.id());
            }
        }
    }
}
