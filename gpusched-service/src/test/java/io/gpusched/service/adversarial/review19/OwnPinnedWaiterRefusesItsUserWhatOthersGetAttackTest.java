package io.gpusched.service.adversarial.review19;

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
 * Review19: FairQueue.holdsBack decides that alice's waiting request for GPU 0 (held by carol) keeps nothing back: no
 * GPU free now could serve it, so bob is served one of the seven free GPUs around it. Alice's own request that does
 * not wait, a moment later, is refused INSUFFICIENT_GPUS "the GPUs free now are owed to the node service's queue, where
 * gsu-alice waits for 1 GPU (indices [0])" (FairQueue.refuseUnreached names her own waiting request as the blocker):
 * the free GPUs are owed to nobody (bob just got one), and alice alone cannot have one while her request for another
 * GPU waits. The refusal's sentence is not true, and the user is held back by a request the queue itself treats as
 * holding nothing back.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class OwnPinnedWaiterRefusesItsUserWhatOthersGetAttackTest {

    @Test
    void aUserWaitingForABusyGpuIsServedAFreeOneAsOthersAre(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300)))) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 61942, false);
            Caller bob = ServiceBed.caller("gsu-bob", 61943, false);
            Caller carol = ServiceBed.caller("gsu-carol", 61944, false);
            Allocation carols = s.allocate(carol, GpuRequests.fromCliFlags(List.of("--devices=0")), Optional.empty(),
                    () -> false);

            try (Queued waiting = Queued.queue(s, alice, "--devices=0")) {
                Allocation bobs = s.allocate(bob, GpuRequests.fromCliFlags(List.of("--gpu=1")), Optional.empty(),
                        () -> false);
                try (Now hers = Now.ask(s, alice, "--gpu=1")) {
                    assertThat(hers.granted).as("alice's 1-GPU request, six GPUs free, bob served one a moment before"
                            + " (queue: %s); refused: %s", s.queueView(), hers.refusal()).isPresent();
                } finally {
                    s.release(bob, bobs.id());
                }
            } finally {
                s.release(carol, carols.id());
            }
        }
    }
}
