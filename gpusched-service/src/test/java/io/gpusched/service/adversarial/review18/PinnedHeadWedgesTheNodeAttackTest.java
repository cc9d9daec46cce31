package io.gpusched.service.adversarial.review18;

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
 * Review18: one unprivileged user wedges the whole node's queue. Alice holds GPU 0 (an allocation of hers she keeps),
 * then asks for GPU 0 again ({@code --devices=0}) with a {@code wait} (up to 3,650 days are taken). Her request can
 * never fit while she keeps GPU 0, and no grant of another GPU can ever stand in its way; yet as the fair head its
 * transient refusal makes it the queue's {@code blocker} (FairQueue's dispatch: "the fair next request does not fit:
 * nobody jumps ahead of it"), so with seven GPUs free, bob's one-GPU request is refused INSUFFICIENT_GPUS "owed to the
 * node service's queue", and so is everyone's, for as long as alice likes. (Bob was served once after alice, so she is
 * the least recently served and goes first: any user who was ever served is behind her.) The GPUs free are not owed
 * to her request: it names GPU 0 only.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class PinnedHeadWedgesTheNodeAttackTest {

    @Test
    void aWaitingRequestForADeviceItsOwnUserHoldsDoesNotKeepTheOtherSevenGpusFromBob(@TempDir Path tmp)
            throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300)))) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 61002, false);
            Caller bob = ServiceBed.caller("gsu-bob", 61003, false);
            Allocation mine = s.allocate(alice, GpuRequests.fromCliFlags(List.of("--devices=0")), Optional.empty(),
                    () -> false);
            Allocation once = s.allocate(bob, GpuRequests.fromCliFlags(List.of("--gpu=1")), Optional.empty(),
                    () -> false);
            s.scheduler().release(once.id());

            try (Queued again = Queued.queue(s, alice, "--devices=0");
                 Now bobs = Now.ask(s, bob, "--gpu=1")) {
                assertThat(bobs.granted).as("bob's 1-GPU request, seven GPUs free, alice holding GPU 0 and waiting"
                        + " for GPU 0 again (queue: %s); refused: %s", s.queueView(), bobs.refusal()).isPresent();
            } finally {
                s.scheduler().release(mine.id());
            }
        }
    }
}
