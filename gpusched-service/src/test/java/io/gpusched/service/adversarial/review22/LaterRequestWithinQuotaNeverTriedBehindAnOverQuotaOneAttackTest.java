package io.gpusched.service.adversarial.review22;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
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
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review22: quota and the backfilling, the other way round from review21. FairQueue.backfillBehind skips ALL of a
 * user's later requests when her first was refused QUOTA_EXCEEDED ({@code continue; // over the user's quota: none of
 * theirs can be served now}); but the quota refuses a request by its size plus what the user holds, so a smaller later
 * request may well be within it. With {@code gpu.users.max_gpus: 3}: alice holds 1 GPU, waits for 3 (1 + 3 > 3: only her
 * own release lets it through), then waits for 1 more (1 + 1 <= 3). Nobody else holds anything: 7 GPUs are idle and
 * nothing is kept for anyone (the over-quota request keeps nothing), yet her 1-GPU request is never even tried until she
 * releases. Promise (docs/SERVICE.md): a user's later waiting requests are tried, after every user's first, on what is
 * kept for no request ahead of them; "a user over their quota is skipped": alice, holding 1 of 3, is not over it.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class LaterRequestWithinQuotaNeverTriedBehindAnOverQuotaOneAttackTest {

    @Test
    void aLaterRequestWithinTheQuotaIsServedThoughTheFirstWouldExceedIt(@TempDir Path tmp) throws Exception {
        GpuConfig config = GpuConfig.builder().users(new UserQuotas(3, Map.of(), Map.of())).service(ServiceSettings
                .defaults().withAdminGroup("gsu-nonexistent").withKillGrace(Duration.ofMillis(300))).build();
        try (ServiceBed bed = new ServiceBed(tmp, config)) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 62241, false);
            Allocation held = s.allocate(alice, GpuRequests.fromCliFlags(List.of("--gpu=1")), Optional.empty(),
                    () -> false);
            try (Queued three = Queued.queue(s, alice, "--gpu=3");
                 Queued one = Queued.queue(s, alice, "--gpu=1")) {
                boolean served = Clients.await(one.result::isDone, 20);
                try {
                    assertThat(served && !one.result.isCompletedExceptionally()).as("alice's waiting 1-GPU request,"
                            + " 7 GPUs idle, alice holding 1 of her quota of 3, her earlier request for 3 over it;"
                            + " queue: %s; her 3-GPU request: %s; result: %s", s.queueView(), three.result,
                            one.result).isTrue();
                } finally {
                    three.gone.set(true);
                }
            } finally {
                s.release(alice, held.id());
            }
        }
    }
}
