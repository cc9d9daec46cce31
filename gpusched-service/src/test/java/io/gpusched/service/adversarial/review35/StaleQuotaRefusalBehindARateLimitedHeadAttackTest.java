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
 * Review35: review32's fix clears a later waiting request's QUOTA_EXCEEDED reason only when FairQueue.backfillBehind
 * reaches it, and backfillBehind skips every later request of a user whose head was last refused RATE_LIMITED. So:
 * alice (max_gpus 2, rate limit burst 2) holds 2 GPUs in two grants (no token left), queues a head and a later 1-GPU
 * request; the later one is marked QUOTA_EXCEEDED ("who holds 2 GPU(s) already"). Alice then releases both: she holds
 * nothing, her head is now refused RATE_LIMITED, and her later request is never looked at again. When its wait runs
 * out it is refused QUOTA_EXCEEDED, "who holds 2 GPU(s) already", though she holds 0: SERVICE.md promises a waiting
 * request is "never [refused] for a quota it no longer exceeds" (review32); refusals are to be true.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class StaleQuotaRefusalBehindARateLimitedHeadAttackTest {

    @Test
    void aLaterRequestIsNotRefusedForAQuotaItsUserNoLongerExceeds(@TempDir Path tmp) throws Exception {
        GpuConfig config = GpuConfig.builder().users(new UserQuotas(2, Map.of(), Map.of())).rateLimit(0.01, 2)
                .service(ServiceSettings.defaults().withAdminGroup("gsu-nonexistent")
                        .withKillGrace(Duration.ofMillis(300)))
                .build();
        try (ServiceBed bed = new ServiceBed(tmp, config)) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice35", 63531, false);
            Allocation a1 = s.allocate(alice, GpuRequests.fromCliFlags(List.of("--gpu=1")), Optional.empty(),
                    () -> false);
            Allocation a2 = s.allocate(alice, GpuRequests.fromCliFlags(List.of("--gpu=1")), Optional.empty(),
                    () -> false);
            try (Queued head = Queued.queue(s, alice, "--gpu=1");
                 Queued later = Queued.queue(s, alice, Duration.ofSeconds(8), "--gpu=1")) {
                Thread.sleep(1500); // the pass that queued it marks it over the quota (alice holds 2 of 2)
                s.release(alice, a1.id());
                s.release(alice, a2.id());
                long holds = s.scheduler().allocations().stream()
                        .filter(a -> a.request().ownerUid().orElse(-1) == 63531)
                        .mapToLong(a -> a.deviceIndices().size()).sum();
                assertThat(Clients.await(later.result::isDone, 60)).as("the later request's 8 s wait ran out").isTrue();
                Throwable why = null;
                try {
                    later.result.join();
                } catch (CompletionException e) {
                    why = e.getCause();
                }
                if (why == null) {
                    return; // served: no refusal to judge
                }
                assertThat(why).isInstanceOf(GpuAllocationException.class);
                GpuAllocationException g = (GpuAllocationException) why;
                long holdsNow = s.scheduler().allocations().stream()
                        .filter(a -> a.request().ownerUid().orElse(-1) == 63531)
                        .mapToLong(a -> a.deviceIndices().size()).sum();
                assertThat(g.reason()).as("alice released both her GPUs (she held %d right after, %d when the wait ran"
                        + " out, of a quota of 2); her later 1-GPU request's refusal: %s (the head: %s)", holds,
                        holdsNow, g.getMessage(), head.result).isNotEqualTo(Reason.QUOTA_EXCEEDED);
            }
        }
    }
}
