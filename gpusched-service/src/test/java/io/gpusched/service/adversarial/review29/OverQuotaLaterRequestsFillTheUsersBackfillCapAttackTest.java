package io.gpusched.service.adversarial.review29;

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
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review29: review27's fix lets a later waiting request that "cannot fit in any placement" skip its try without
 * counting against the backfill caps (FairQueue.backfillBehind's pre-check: too few usable free GPUs, or a required one
 * not free). The pre-check looks at the GPUs only, never at the user's quota: a later request over its user's quota
 * passes it, is tried, is refused QUOTA_EXCEEDED, and counts against PER_USER_BACKFILL (8) all the same (and quota
 * refusals are never remembered in shortOf, so identical ones count again, one each). With gpu.users.max_gpus 4: alice
 * holds 1 GPU and waits for 4 GPUs nine times (1 + 4 > 4: each waits on her own release), then for 1 GPU (1 + 1 within
 * her quota, 7 GPUs idle, nobody else on the node, nothing kept for anyone: over-quota requests keep nothing). Her
 * 1-GPU request is never tried, in any pass, for as long as she holds her GPU. SERVICE.md: "Nothing is kept for a
 * request over its user's quota; a smaller one of the same user after it is still tried" and "requests ..., however
 * many and however different, do not keep one behind them from being tried".
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class OverQuotaLaterRequestsFillTheUsersBackfillCapAttackTest {

    @Test
    void aRequestWithinTheQuotaIsTriedBehindNineOverQuotaOnes(@TempDir Path tmp) throws Exception {
        GpuConfig config = GpuConfig.builder().users(new UserQuotas(4, Map.of(), Map.of())).service(ServiceSettings
                .defaults().withAdminGroup("gsu-nonexistent").withKillGrace(Duration.ofMillis(300))).build();
        try (ServiceBed bed = new ServiceBed(tmp, config)) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 62901, false);
            Allocation held = s.allocate(alice, GpuRequests.fromCliFlags(List.of("--gpu=1")), Optional.empty(),
                    () -> false);
            List<Queued> over = new ArrayList<>();
            try {
                for (int i = 0; i < 9; i++) {
                    over.add(Queued.queue(s, alice, "--gpu=4"));
                }
                assertThat(over).as("1 held + 4 asked > her quota of 4: each waits").allMatch(q -> !q.result
                        .isDone());
                try (Queued one = Queued.queue(s, alice, "--gpu=1")) {
                    boolean served = Clients.await(one.result::isDone, 20);
                    assertThat(served && !one.result.isCompletedExceptionally()).as("alice's waiting 1-GPU request"
                            + " (1 held + 1 within her quota of 4, 7 GPUs idle, nobody else on the node) behind her"
                            + " 9 over-quota requests for 4; queue size %s; result: %s", s.queueView().size(),
                            one.result).isTrue();
                }
            } finally {
                for (Queued q : over) {
                    q.gone.set(true);
                }
                s.release(alice, held.id());
            }
        }
    }
}
