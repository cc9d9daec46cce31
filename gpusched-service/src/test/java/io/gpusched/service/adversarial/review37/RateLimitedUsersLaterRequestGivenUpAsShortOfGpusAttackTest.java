package io.gpusched.service.adversarial.review37;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuAllocationException.Reason;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.ServiceSettings;
import io.gpusched.server.Caller;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.adversarial.review10.Clients;
import io.gpusched.service.adversarial.review10.Queued;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review37: FairQueue.backfillBehind never tries the later waiting requests of a user whose first waiting request met
 * the rate limit ("paced": since 52e79fe7 only FairQueue.overQuota looks at them, which sets or drops a QUOTA_EXCEEDED
 * reason and nothing else). Their last refusal stays null, and FairQueue's expiry (the "gave up after waiting" path)
 * turns a null last refusal into INSUFFICIENT_GPUS. So alice (rate limit: burst 1, next token in hours) takes one GPU,
 * queues a head and a later 1-GPU request with a short wait: the later one is refused "INSUFFICIENT_GPUS" on a node
 * with 7 of its 8 GPUs free. The only reason she was not served is her rate. Issue 33: every refusal typed and true.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class RateLimitedUsersLaterRequestGivenUpAsShortOfGpusAttackTest {

    @Test
    void aPacedLaterRequestIsRefusedForItsRateNotForWantOfGpus(@TempDir Path tmp) throws Exception {
        GpuConfig config = GpuConfig.builder().rateLimit(0.0001, 1)
                .service(ServiceSettings.defaults().withAdminGroup("gsu-nonexistent")
                        .withKillGrace(Duration.ofMillis(300)))
                .build();
        try (ServiceBed bed = new ServiceBed(tmp, config)) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice37", 63740, false, "gsu-alice37");
            Allocation a = s.allocate(alice, GpuRequests.fromCliFlags(List.of("--gpu=1")), Optional.empty(),
                    () -> false); // her one token
            try (Queued head = Queued.queue(s, alice, "--gpu=1");
                 Queued later = Queued.queue(s, alice, Duration.ofSeconds(4), "--gpu=1")) {
                assertThat(Clients.await(later.result::isDone, 60)).as("the later request's 4 s wait ran out")
                        .isTrue();
                Throwable why = null;
                try {
                    later.result.join();
                } catch (CompletionException e) {
                    why = e.getCause();
                }
                assertThat(why).as("alice has no token left: her later request cannot be served (head: %s)",
                        head.result).isInstanceOf(GpuAllocationException.class);
                long free = 8 - s.scheduler().allocations().stream().mapToLong(x -> x.deviceIndices().size()).sum();
                GpuAllocationException g = (GpuAllocationException) why;
                assertThat(g.reason()).as("the later request's refusal, with %d of 8 GPUs free and alice's rate"
                        + " spent: %s", free, g.getMessage()).isEqualTo(Reason.RATE_LIMITED);
            } finally {
                s.release(alice, a.id());
            }
        }
    }
}
