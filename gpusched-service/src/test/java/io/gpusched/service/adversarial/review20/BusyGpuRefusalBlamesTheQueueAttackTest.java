package io.gpusched.service.adversarial.review20;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuAllocationException.Reason;
import io.gpusched.core.GpuRequests;
import io.gpusched.server.Caller;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.adversarial.review10.Clients;
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
 * Review20: a misleading refusal. Carol holds GPU 0, alice waits for GPUs 0 and 1 by name (so GPUs 0 and 1 are kept
 * for her), dave holds GPU 5. Bob asks, without a wait, for GPU 5: the queue keeps nothing of GPU 5 for anyone, and the
 * true answer is the one bob gets when nobody waits: DEVICE_BUSY, GPU 5 is held by dave. FairQueue.refuseUnreached
 * replaces every transient refusal with INSUFFICIENT_GPUS "the GPUs free now are owed to the node service's queue,
 * where gsu-alice waits for ... ask with a wait to queue fairly behind it": GPU 5 is not free, not owed to the queue,
 * and queueing behind alice will not get it sooner.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class BusyGpuRefusalBlamesTheQueueAttackTest {

    @Test
    void aNamedGpuHeldByAnotherUserIsRefusedAsBusyNotAsOwedToTheQueue(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300)))) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 62021, false);
            Caller bob = ServiceBed.caller("gsu-bob", 62022, false);
            Caller carol = ServiceBed.caller("gsu-carol", 62023, false);
            Caller dave = ServiceBed.caller("gsu-dave", 62024, false);
            Allocation carols = s.allocate(carol, GpuRequests.fromCliFlags(List.of("--devices=0")), Optional.empty(),
                    () -> false);
            Allocation daves = s.allocate(dave, GpuRequests.fromCliFlags(List.of("--devices=5")), Optional.empty(),
                    () -> false);
            try (Queued hers = Queued.queue(s, alice, "--devices=0,1")) {
                Optional<Allocation> bobs = Optional.empty();
                GpuAllocationException refused = null;
                try {
                    bobs = Optional.of(s.allocate(bob, GpuRequests.fromCliFlags(List.of("--devices=5")), Optional
                            .empty(), () -> false));
                } catch (GpuAllocationException e) {
                    refused = e;
                }
                try {
                    assertThat(bobs).as("GPU 5 is dave's").isEmpty();
                    assertThat(refused.reason() + " " + refused.getMessage()).as("bob's refusal for GPU 5, held by"
                            + " dave, while alice waits for GPUs 0 and 1").startsWith(Reason.DEVICE_BUSY.name())
                            .doesNotContain("owed to the node service's queue");
                } finally {
                    if (bobs.isPresent()) {
                        s.release(bob, bobs.get().id());
                    }
                    hers.gone.set(true);
                }
            } finally {
                s.release(dave, daves.id());
                s.release(carol, carols.id());
            }
        }
    }
}
