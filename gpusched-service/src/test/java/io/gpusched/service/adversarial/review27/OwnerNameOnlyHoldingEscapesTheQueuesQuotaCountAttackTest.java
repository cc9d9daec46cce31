package io.gpusched.service.adversarial.review27;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuRequest;
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
 * Review27: "quota counted differently from the scheduler". The scheduler (DefaultGpuScheduler.checkQuota /
 * ownedBySame) counts against a user every live allocation of the same uid where both sides have one, ELSE of the
 * same owner name: an allocation an engine of the node made for "gsu-alice" without a uid (a Spark or YARN host, a
 * library caller on the ledger) counts. FairQueue.ownHeld, which keptFor compares with GpuScheduler.quotaFor (review24's
 * fix), counts only allocations of the uid. With a quota of 3, alice holds 1 GPU through the service and 1 through an
 * engine (owner name only): 2 in the scheduler's count, 1 in the queue's. She waits for 2 more (the scheduler refuses:
 * QUOTA_EXCEEDED, 4 > 3). Her request without a wait for 1 GPU (3 in all: within the quota, 6 GPUs idle, nobody else
 * on the node) is refused: refuseUnreached keeps for her earlier request everything keptFor gives it, and keptFor,
 * counting 1 + 2 = 3, thinks it could be served. Review24's test, with the holding split between the service and an
 * engine.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class OwnerNameOnlyHoldingEscapesTheQueuesQuotaCountAttackTest {

    @Test
    void aRequestWithinTheQuotaIsServedThoughAnEngineHoldsAGpuInTheUsersName(@TempDir Path tmp) throws Exception {
        GpuConfig config = GpuConfig.builder().users(new UserQuotas(3, Map.of(), Map.of())).service(ServiceSettings
                .defaults().withAdminGroup("gsu-nonexistent").withKillGrace(Duration.ofMillis(300))).build();
        try (ServiceBed bed = new ServiceBed(tmp, config)) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 62741, false);
            Allocation viaService = s.allocate(alice, GpuRequests.fromCliFlags(List.of("--gpu=1")), Optional.empty(),
                    () -> false);
            // an engine of the node allocating for alice by name (no uid): the scheduler counts it as hers
            Allocation viaEngine = bed.scheduler.allocate(GpuRequest.builder().count(1).owner("gsu-alice").build());
            GpuAllocationException overQuota = null;
            try {
                bed.scheduler.allocate(GpuRequest.builder().count(2).owner("gsu-alice").ownerUid(62741).build())
                        .id();
            } catch (GpuAllocationException e) {
                overQuota = e;
            }
            assertThat(overQuota).as("the scheduler counts both of alice's GPUs: 2 + 2 > 3").isNotNull();
            assertThat(overQuota.reason()).isEqualTo(GpuAllocationException.Reason.QUOTA_EXCEEDED);
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
                s.release(alice, viaService.id());
                bed.scheduler.release(viaEngine.id());
            }
        }
    }
}
