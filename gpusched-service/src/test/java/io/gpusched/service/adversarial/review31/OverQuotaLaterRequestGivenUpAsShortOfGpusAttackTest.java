package io.gpusched.service.adversarial.review31;

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
 * Review31: 9be07280 skips a later waiting request over its owner's quota in FairQueue.backfillBehind ("not tried,
 * not counted") but never records why: its lastRefusal stays null, so when its wait runs out FairQueue.sweep refuses
 * it INSUFFICIENT_GPUS ("requested; gave up after waiting ...") though six GPUs are idle and the only thing between
 * it and a grant is its own user's quota. The promise: refusals are true and typed (QUOTA_EXCEEDED, naming the
 * limit). With a quota of 2, alice holds 2 and queues two 1-GPU requests: the first (her lane's head, long wait) is
 * refused QUOTA_EXCEEDED by each pass; the second (wait 2 s) is skipped, and given up as short of GPUs.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class OverQuotaLaterRequestGivenUpAsShortOfGpusAttackTest {

    @Test
    void aLaterRequestOverTheQuotaIsRefusedForTheQuotaWhenItsWaitRunsOut(@TempDir Path tmp) throws Exception {
        GpuConfig config = GpuConfig.builder().users(new UserQuotas(2, Map.of(), Map.of())).service(ServiceSettings
                .defaults().withAdminGroup("gsu-nonexistent").withKillGrace(Duration.ofMillis(300))).build();
        try (ServiceBed bed = new ServiceBed(tmp, config)) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 63111, false);
            Allocation held = s.allocate(alice, GpuRequests.fromCliFlags(List.of("--gpu=2")), Optional.empty(),
                    () -> false);
            try (Queued head = Queued.queue(s, alice, "--gpu=1");
                 Queued later = Queued.queue(s, alice, Duration.ofSeconds(2), "--gpu=1")) {
                assertThat(Clients.await(later.result::isDone, 40)).as("the later request's 2 s wait ran out; queue %s",
                        s.queueView()).isTrue();
                assertThat(later.result).isCompletedExceptionally();
                Throwable why = null;
                try {
                    later.result.join();
                } catch (CompletionException e) {
                    why = e.getCause();
                }
                assertThat(why).isInstanceOf(GpuAllocationException.class);
                GpuAllocationException g = (GpuAllocationException) why;
                assertThat(g.reason()).as("alice holds 2 of her quota of 2, six GPUs idle, nobody else on the node:"
                        + " her later request's refusal when its wait ran out: %s (the head's: %s)", g.getMessage(),
                        head.result).isEqualTo(Reason.QUOTA_EXCEEDED);
            } finally {
                s.release(alice, held.id());
            }
        }
    }
}
