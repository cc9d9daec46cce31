package io.gpusched.service.adversarial.review21;

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
 * Review21: quota interplay with the backfilling. In the main pass a waiting request refused QUOTA_EXCEEDED keeps
 * nothing (FairQueue.dispatch: "this user cannot be served now whatever is free"), but FairQueue.backfillBehind, which
 * tries each user's LATER waiting requests, keeps for one refused QUOTA_EXCEEDED every GPU it could use
 * ({@code withheld.addAll(keptFor(t))}: the refusal is transient, and keptFor looks at the GPUs, not at the quota).
 * With {@code gpu.users.max_gpus: 2}: carol holds GPU 0, alice holds GPU 1, waits for GPU 0 (within her quota), then
 * waits for 2 more GPUs (over it: only her own release can ever let it through). Bob waits for GPU 0 too, then for any
 * one GPU. Six GPUs are free, and the only request "kept" on them is alice's over-quota one, yet bob's second request
 * is never served while alice holds her GPU: one user's request that cannot be served because of her own quota keeps
 * the node from others.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class OverQuotaLaterRequestKeepsGpusFromOthersAttackTest {

    @Test
    void aLaterRequestOverItsUsersQuotaKeepsNoFreeGpuFromBob(@TempDir Path tmp) throws Exception {
        GpuConfig config = GpuConfig.builder().users(new UserQuotas(2, Map.of(), Map.of())).service(ServiceSettings
                .defaults().withAdminGroup("gsu-nonexistent").withKillGrace(Duration.ofMillis(300))).build();
        try (ServiceBed bed = new ServiceBed(tmp, config)) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 62131, false);
            Caller bob = ServiceBed.caller("gsu-bob", 62132, false);
            Caller carol = ServiceBed.caller("gsu-carol", 62133, false);
            Allocation carols = s.allocate(carol, GpuRequests.fromCliFlags(List.of("--devices=0")), Optional.empty(),
                    () -> false);
            Allocation alices = s.allocate(alice, GpuRequests.fromCliFlags(List.of("--devices=1")), Optional.empty(),
                    () -> false);
            // bob served after alice: alice is ahead of bob in fair order
            Allocation once = s.allocate(bob, GpuRequests.fromCliFlags(List.of("--gpu=1")), Optional.empty(),
                    () -> false);
            s.release(bob, once.id());
            try (Queued pinned = Queued.queue(s, alice, "--devices=0");
                 Queued overQuota = Queued.queue(s, alice, "--gpu=2");
                 Queued bobPinned = Queued.queue(s, bob, "--devices=0");
                 Queued any = Queued.queue(s, bob, "--gpu=1")) {
                boolean served = Clients.await(any.result::isDone, 20);
                assertThat(served && !any.result.isCompletedExceptionally()).as("bob's waiting 1-GPU request, GPUs 2"
                        + " to 7 free, the only request after his own ahead of it alice's for 2 GPUs while she holds 1"
                        + " of her quota of 2; queue: %s; alice's over-quota request: %s; result: %s",
                        s.queueView(), overQuota.result, any.result).isTrue();
                pinned.gone.set(true);
                overQuota.gone.set(true);
                bobPinned.gone.set(true);
                any.gone.set(true);
            } finally {
                s.release(alice, alices.id());
                s.release(carol, carols.id());
            }
        }
    }
}
