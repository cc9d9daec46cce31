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
import java.util.ArrayList;
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
 * Review32: e54e0c47 records a QUOTA_EXCEEDED lastRefusal on a later waiting request that FairQueue.backfillBehind
 * skips for its owner's quota ("who holds N GPU(s) already"), but the same method checks "too few GPUs free" BEFORE the
 * quota and leaves lastRefusal untouched then. So once the user has released (holding nothing, well within the quota)
 * and the freed GPUs went to another user, the later request is skipped as short of GPUs every pass, and its stale
 * QUOTA_EXCEEDED refusal ("alice, who holds 2 GPU(s) already") is what its caller is told when its wait runs out:
 * a false refusal (issue 33: refusals are true and typed).
 *
 * <p>Setup: quota 2 each (bob 4); carol 2, dave 2, erin 1 (5 of 8); alice holds 2; one GPU idle. alice queues a head (1 GPU,
 * long wait: over quota) and a later request L (1 GPU, 12 s): a pass skips L for the quota (one GPU was free). Then bob
 * queues 3 GPUs (never served: first in turn, does not fit). alice releases her 2: bob takes the 3 idle GPUs. alice now
 * holds 0; L is short of GPUs, not over any quota.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class StaleQuotaRefusalAfterTheUserReleasedAttackTest {

    @Test
    void aRequestGivenUpAfterItsUserReleasedIsNotRefusedForAQuotaItNoLongerMeets(@TempDir Path tmp) throws Exception {
        GpuConfig config =
                GpuConfig.builder().users(new UserQuotas(2, Map.of("gsu-bob", 4), Map.of())).service(ServiceSettings
                        .defaults().withAdminGroup("gsu-nonexistent").withKillGrace(Duration.ofMillis(300))).build();
        try (ServiceBed bed = new ServiceBed(tmp, config)) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 63211, false);
            Caller bob = ServiceBed.caller("gsu-bob", 63212, false);
            Caller carol = ServiceBed.caller("gsu-carol", 63213, false);
            Caller dave = ServiceBed.caller("gsu-dave", 63214, false);
            Caller erin = ServiceBed.caller("gsu-erin", 63215, false);
            List<Object[]> others = new ArrayList<>();
            others.add(new Object[]{carol, s.allocate(carol, GpuRequests.fromCliFlags(List.of("--gpu=2")), Optional
                    .empty(), () -> false)});
            others.add(new Object[]{dave, s.allocate(dave, GpuRequests.fromCliFlags(List.of("--gpu=2")), Optional
                    .empty(), () -> false)});
            others.add(new Object[]{erin, s.allocate(erin, GpuRequests.fromCliFlags(List.of("--gpu=1")), Optional
                    .empty(), () -> false)});
            Allocation held = s.allocate(alice, GpuRequests.fromCliFlags(List.of("--gpu=2")), Optional.empty(),
                    () -> false);
            boolean aliceReleased = false;
            try (Queued head = Queued.queue(s, alice, "--gpu=1");
                 Queued later = Queued.queue(s, alice, Duration.ofSeconds(12), "--gpu=1")) {
                // let the dispatcher make its pass with the one idle GPU (L skipped for alice's quota); a settle, no
                // assertion hangs on it
                Thread.sleep(1500);
                try (Queued big = Queued.queue(s, bob, "--gpu=3")) {
                    Thread.sleep(800);
                    s.release(alice, held.id());
                    aliceReleased = true;
                    assertThat(Clients.await(big.result::isDone, 30)).as("bob's 3-GPU request is served once alice"
                            + " released; queue %s", s.queueView()).isTrue();
                    assertThat(big.result).as("bob's 3 GPUs").isCompleted();
                    assertThat(Clients.await(later.result::isDone, 40)).as("L's 12 s wait ran out; queue %s", s
                            .queueView()).isTrue();
                    Throwable why = null;
                    try {
                        later.result.join();
                    } catch (CompletionException e) {
                        why = e.getCause();
                    }
                    long aliceHolds = s.scheduler().allocations().stream().filter(a -> a.owner().orElse("").equals(
                            "gsu-alice")).mapToLong(a -> a.deviceIndices().size()).sum();
                    assertThat(why).as("L is given up, not served (no GPU idle)").isInstanceOf(
                            GpuAllocationException.class);
                    GpuAllocationException g = (GpuAllocationException) why;
                    assertThat(g.reason()).as("alice holds %s GPU(s) (quota 2), L asks 1 and no GPU is idle; L's"
                            + " refusal when its wait ran out: %s", aliceHolds, g.getMessage()).isNotEqualTo(
                                    Reason.QUOTA_EXCEEDED);
                }
            } finally {
                if (!aliceReleased) {
                    s.release(alice, held.id());
                }
                for (Object[] o : others) {
                    s.release((Caller) o[0], ((Allocation) o[1]).id());
                }
            }
        }
    }
}
