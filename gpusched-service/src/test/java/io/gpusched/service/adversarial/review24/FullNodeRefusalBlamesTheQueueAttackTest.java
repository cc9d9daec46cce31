package io.gpusched.service.adversarial.review24;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
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
 * Review24: review20's "busy GPU refusal blames the queue", by count instead of by name. Carol holds GPUs 0 to 6; only
 * GPU 7 is free. Dave asks, without a wait, for 2 GPUs: with nobody waiting he is refused by the scheduler (one GPU
 * free). Alice then waits for GPU 0 (carol's): only GPU 0 is kept for her, and it is not free. Dave asks again: the
 * true answer is unchanged (the node has one free GPU, owed to nobody), but FairQueue.refuseUnreached names as "ahead"
 * the first request kept ANY GPU dave could ever use (Kept.keeperOf(usable(n), n): GPU 0, busy), and answers "the GPUs
 * free now are owed to the node service's queue, where gsu-alice waits for GPU 0 ... ask with a wait to queue fairly
 * behind it". No free GPU is owed to anyone, and queueing behind alice gets dave nothing sooner.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class FullNodeRefusalBlamesTheQueueAttackTest {

    @Test
    void aCountThatDoesNotFitTheFreeGpusIsNotSaidToBeOwedToTheQueue(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300)))) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 62421, false);
            Caller carol = ServiceBed.caller("gsu-carol", 62423, false);
            Caller dave = ServiceBed.caller("gsu-dave", 62424, false);
            Allocation carols = s.allocate(carol, GpuRequests.fromCliFlags(List.of("--devices=0,1,2,3,4,5,6")),
                    Optional.empty(), () -> false);
            GpuAllocationException alone = refusal(s, dave);
            assertThat(alone).as("dave's 2 GPUs, one free, nobody waiting").isNotNull();
            try (Queued hers = Queued.queue(s, alice, "--devices=0")) {
                GpuAllocationException queued = refusal(s, dave);
                try {
                    assertThat(queued).as("dave's 2 GPUs, one free, alice waiting for GPU 0 (busy)").isNotNull();
                    assertThat(queued.reason() + " " + queued.getMessage()).as("dave's refusal while alice waits for"
                            + " GPU 0 (held by carol; GPU 7, the only free one, is kept for nobody); the refusal with"
                            + " nobody waiting: %s %s; queue: %s", alone.reason(), alone.getMessage(), s.queueView())
                            .doesNotContain("owed to the node service's queue").doesNotContain("gsu-alice");
                } finally {
                    hers.gone.set(true);
                }
            } finally {
                s.release(carol, carols.id());
            }
        }
    }

    /** @return dave's refusal for 2 GPUs without a wait (null: served, and released) */
    private static GpuAllocationException refusal(NodeService s, Caller dave) throws InterruptedException {
        try {
            Allocation a = s.allocate(dave, GpuRequests.fromCliFlags(List.of("--gpu=2")), Optional.empty(),
                    () -> false);
            s.release(dave, a.id());
            return null;
        } catch (GpuAllocationException e) {
            return e;
        }
    }
}
