package io.gpusched.service.adversarial.review24;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.ServiceSettings;
import io.gpusched.core.UserQuotas;
import io.gpusched.server.Caller;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.adversarial.review10.Now;
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
 * Review24: review22's "a smaller later request of a user whose earlier one is over quota is still tried" holds for a
 * later request that WAITS (backfillBehind: QUOTA_EXCEEDED keeps nothing), not for one that does not. With a quota of
 * 3, alice holds 2 GPUs and waits for 2 more (over her quota: it cannot be served until SHE releases). She then asks,
 * without a wait, for 1 GPU (3 in all: within her quota), 6 GPUs idle, nobody else on the node.
 * FairQueue.refuseUnreached keeps for "its own user's earlier waiting requests" everything FairQueue.keptFor gives
 * them, and keptFor does not know quotas: all 8 GPUs are kept for her over-quota request, and her request within the
 * quota is refused, told the GPUs are owed to the queue where she herself waits.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class OwnOverQuotaRequestRefusesTheUsersRequestWithinItAttackTest {

    @Test
    void aRequestWithinTheQuotaWithoutAWaitIsServedThoughAnEarlierWaitingOneIsOverIt(@TempDir Path tmp)
            throws Exception {
        GpuConfig config = GpuConfig.builder().users(new UserQuotas(3, Map.of(), Map.of())).service(ServiceSettings
                .defaults().withAdminGroup("gsu-nonexistent").withKillGrace(Duration.ofMillis(300))).build();
        try (ServiceBed bed = new ServiceBed(tmp, config)) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 62411, false);
            Allocation held = s.allocate(alice, GpuRequests.fromCliFlags(List.of("--gpu=2")), Optional.empty(),
                    () -> false);
            try (Queued over = Queued.queue(s, alice, "--gpu=2")) {
                assertThat(over.result).as("2 held + 2 asked > her quota of 3: it waits").isNotDone();
                try (Now one = Now.ask(s, alice, "--gpu=1")) {
                    assertThat(one.granted).as(
                            "alice's 1-GPU request without a wait (2 held + 1 = her quota of 3), 6 GPUs"
                                    + " idle, nobody else on the node, her earlier waiting request for 2 over her quota;"
                                    + " queue: %s; refused: %s",
                            s.queueView(),
                            one.refusal()).isPresent();
                } finally {
                    over.gone.set(true);
                }
            } finally {
                s.release(alice, held.id());
            }
        }
    }
}
