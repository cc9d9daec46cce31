package io.gpusched.service.adversarial.review32;

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
 * Review32: SERVICE.md promises a QUOTA_EXCEEDED refusal "naming the limit, where it comes from, and what the user
 * holds" (the scheduler's says e.g. "gpu.users.per_user.alice"). e54e0c47's refusal for a later waiting request
 * skipped for its owner's quota (FairQueue.backfillBehind) always says "per user (gpu.users)", whatever the limit's
 * source: a per-user override of 2 for alice (no node-wide limit) is reported as a node-wide "gpu.users" limit, so
 * alice is pointed at the wrong setting. Same setup as review31's test, with the limit from gpu.users.per_user.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class QuotaRefusalOfAWaitingRequestNamesTheWrongLimitAttackTest {

    @Test
    void aWaitingRequestsQuotaRefusalNamesWhereItsLimitComesFrom(@TempDir Path tmp) throws Exception {
        GpuConfig config =
                GpuConfig.builder().users(new UserQuotas(0, Map.of("gsu-alice", 2), Map.of())).service(ServiceSettings
                        .defaults().withAdminGroup("gsu-nonexistent").withKillGrace(Duration.ofMillis(300))).build();
        try (ServiceBed bed = new ServiceBed(tmp, config)) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 63221, false);
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
                assertThat(g.getMessage()).as("the refusal names where alice's limit of 2 comes from (her per-user"
                        + " override; there is no node-wide limit)").contains("gpu.users.per_user.gsu-alice");
            } finally {
                s.release(alice, held.id());
            }
        }
    }
}
