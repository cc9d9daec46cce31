package io.gpusched.service.adversarial.review21;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequests;
import io.gpusched.server.Caller;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.adversarial.review10.Clients;
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
 * Review21: review20's "one user keeps the whole node from everyone" (OwnHoldingKeepsTheNodeFromEveryoneAttackTest),
 * again, through a shared reservation. The fix (FairQueue.keptFor) counts a user's own GPUs as blocking her request
 * only when one of the two is exclusive; a shared request blocked by the user's OWN shared reservation is not seen as
 * own-blocked. Alice reserves 24 GB shared on GPU 0 (of 32 GiB), then queues, with a wait of years, 8 GPUs shared
 * with 16 GB each: GPU 0 has 8 GB reservable left, so it can only fit once she releases her own reservation (nobody
 * else holds anything). Yet keptFor counts all 8 GPUs as "could be served" and keeps them all, so bob's exclusive
 * 1-GPU request is refused INSUFFICIENT_GPUS with 7 GPUs idle, for as long as alice likes. Promise (issue 33, the
 * fix's own words): nothing is kept for a request that could not be served even if every other user's allocation
 * ended.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class OwnSharedReservationKeepsTheNodeFromEveryoneAttackTest {

    @Test
    void aSharedRequestOnlyItsOwnUsersReleaseCanFitKeepsNoFreeGpuFromBob(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300)))) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 62101, false);
            Caller bob = ServiceBed.caller("gsu-bob", 62102, false);
            Allocation held = s.allocate(alice, GpuRequests.fromCliFlags(List.of("--devices=0", "--shared=24GB")),
                    Optional.empty(), () -> false);
            // bob was served after alice: she is the least recently served, her request the fair next
            Allocation once = s.allocate(bob, GpuRequests.fromCliFlags(List.of("--gpu=1")), Optional.empty(),
                    () -> false);
            s.release(bob, once.id());
            try (Queued all = Queued.queue(s, alice, "--gpu=8", "--shared=16GB")) {
                assertThat(all.result).as("alice's 8 x 16 GB shared cannot fit beside her own 24 GB on GPU 0")
                        .isNotDone();
                try (Now bobs = Now.ask(s, bob, "--gpu=1")) {
                    assertThat(bobs.granted).as(
                            "bob's exclusive 1-GPU request, GPUs 1 to 7 free, alice holding 24 GB shared"
                                    + " on GPU 0 and waiting for 8 x 16 GB shared, which only her own release can fit"
                                    + " (queue: %s); refused: %s",
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
