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
import io.gpusched.service.adversarial.review10.Now;
import io.gpusched.service.adversarial.review10.Queued;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review22: review21's "own shared reservation keeps the node from everyone", through the OTHER limit of a shared GPU:
 * the number of shares it takes ({@code gpu.max_shared_per_gpu}), not its memory. FairQueue.keptFor counts, for a
 * shared request, only the memory its user's own shared reservations take; it does not count the share slots they
 * fill. With {@code max_shared_per_gpu: 1}, alice holds one 1 GB share of GPU 0 (its only slot, 31 GB unreserved),
 * then waits, for as long as she likes, for 8 GPUs shared with 1 GB each: GPU 0 can take no other share until SHE
 * releases hers (nobody else holds anything), so her request could not be served even if every other user's allocation
 * ended. keptFor nevertheless counts GPU 0 as one she could get and keeps all 8 GPUs for her: bob's one-GPU request is
 * refused with 7 GPUs idle. Promise (docs/SERVICE.md, issue 33): nothing is kept for a request that could not be
 * served even if every other user's allocation ended.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class OwnShareSlotsKeepTheNodeFromEveryoneAttackTest {

    @Test
    void aSharedRequestOnlyItsOwnUsersShareSlotBlocksKeepsNoFreeGpuFromBob(@TempDir Path tmp) throws Exception {
        GpuConfig config = GpuConfig.builder().users(UserQuotas.none()).maxSharedPerGpu(1).service(ServiceSettings
                .defaults().withAdminGroup("gsu-nonexistent").withKillGrace(Duration.ofMillis(300))).build();
        try (ServiceBed bed = new ServiceBed(tmp, config)) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 62201, false);
            Caller bob = ServiceBed.caller("gsu-bob", 62202, false);
            Allocation held = s.allocate(alice, GpuRequests.fromCliFlags(List.of("--devices=0", "--shared=1GB")),
                    Optional.empty(), () -> false);
            // bob served after alice: she is the least recently served, her request the fair next
            Allocation once = s.allocate(bob, GpuRequests.fromCliFlags(List.of("--gpu=1")), Optional.empty(),
                    () -> false);
            s.release(bob, once.id());
            try (Queued all = Queued.queue(s, alice, "--gpu=8", "--shared=1GB")) {
                assertThat(all.result).as("alice's 8 x 1 GB shared cannot fit while her own share fills GPU 0's one"
                        + " slot").isNotDone();
                try (Now bobs = Now.ask(s, bob, "--gpu=1")) {
                    assertThat(bobs.granted).as(
                            "bob's exclusive 1-GPU request, GPUs 1 to 7 idle, alice holding GPU 0's only"
                                    + " share slot (max_shared_per_gpu 1) and waiting for 8 shares, which only her own"
                                    + " release can fit (queue: %s); refused: %s",
                            s.queueView(),
                            bobs.refusal()).isPresent();
                } finally {
                    all.gone.set(true);
                }
            } finally {
                s.release(alice, held.id());
            }
        }
    }
}
