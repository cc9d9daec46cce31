package io.gpusched.service.adversarial.review22;

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
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review22: refusals must be true. A request short of GPUs kept for a waiting request ahead is refused "naming that
 * request (who waits, for what, since when)" (docs/SERVICE.md). The queue names the FIRST waiting request that did not
 * fit (FairQueue.dispatch's {@code blocker}), not the one the GPU is kept for. Carol holds GPU 0; alice waits for GPU
 * 0 (nothing but GPU 0 is kept for her); bob waits for all 8 GPUs (GPUs 1 to 7 are kept for him). Dave, served most
 * recently, asks for GPU 5: it is rightly refused, GPU 5 being kept for bob, but the refusal says it is owed to alice's
 * request for GPU 0, which could never use GPU 5; the user is told to queue behind the wrong request and blamed on a
 * user who has nothing to do with it.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class RefusalNamesARequestThatCouldNeverUseTheGpuAttackTest {

    /** Carol holds GPU 0; alice, bob, dave were served in that order (dave last: behind the others in fair order). */
    private static Allocation setUp(NodeService s, Caller alice, Caller bob, Caller carol, Caller dave)
            throws InterruptedException {
        Allocation carols = s.allocate(carol, GpuRequests.fromCliFlags(List.of("--devices=0")), Optional.empty(),
                () -> false);
        for (Caller c : List.of(alice, bob, dave)) {
            Allocation once = s.allocate(c, GpuRequests.fromCliFlags(List.of("--gpu=1")), Optional.empty(),
                    () -> false);
            s.release(c, once.id());
        }
        return carols;
    }

    @Test
    void aRequestThatDoesNotWaitIsToldTheGpuIsOwedToTheRequestItIsKeptFor(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300)))) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 62221, false);
            Caller bob = ServiceBed.caller("gsu-bob", 62222, false);
            Caller carol = ServiceBed.caller("gsu-carol", 62223, false);
            Caller dave = ServiceBed.caller("gsu-dave", 62224, false);
            Allocation carols = setUp(s, alice, bob, carol, dave);
            try (Queued pinned = Queued.queue(s, alice, "--devices=0");
                 Queued whole = Queued.queue(s, bob, "--gpu=8")) {
                Optional<Allocation> daves = Optional.empty();
                GpuAllocationException refused = null;
                try {
                    daves = Optional.of(s.allocate(dave, GpuRequests.fromCliFlags(List.of("--devices=5")),
                            Optional.empty(), () -> false));
                } catch (GpuAllocationException e) {
                    refused = e;
                }
                try {
                    assertThat(daves).as("GPU 5 is kept for bob's 8-GPU request, ahead of dave").isEmpty();
                    assertThat(refused.getMessage()).as("dave's refusal for GPU 5 (kept for bob's 8 GPUs; alice waits"
                            + " for GPU 0 only); queue: %s", s.queueView()).contains("gsu-bob").doesNotContain(
                                    "gsu-alice");
                } finally {
                    if (daves.isPresent()) {
                        s.release(dave, daves.get().id());
                    }
                }
            } finally {
                s.release(carol, carols.id());
            }
        }
    }

    @Test
    void aWaitingRequestThatGivesUpIsToldTheGpuIsOwedToTheRequestItIsKeptFor(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300)))) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 62225, false);
            Caller bob = ServiceBed.caller("gsu-bob", 62226, false);
            Caller carol = ServiceBed.caller("gsu-carol", 62227, false);
            Caller dave = ServiceBed.caller("gsu-dave", 62228, false);
            Allocation carols = setUp(s, alice, bob, carol, dave);
            try (Queued pinned = Queued.queue(s, alice, "--devices=0");
                 Queued whole = Queued.queue(s, bob, "--gpu=8");
                 Queued daves = Queued.queue(s, dave, Duration.ofSeconds(2), "--devices=5")) {
                assertThat(Clients.await(daves.result::isDone, 30)).as("dave's 2 s wait ran out").isTrue();
                Throwable refused = null;
                try {
                    daves.result.get();
                } catch (ExecutionException e) {
                    refused = e.getCause();
                }
                assertThat(refused).as("GPU 5 is kept for bob's 8-GPU request, ahead of dave")
                        .isInstanceOf(GpuAllocationException.class);
                assertThat(refused.getMessage()).as("dave's refusal, after his wait for GPU 5 (kept for bob's 8 GPUs;"
                        + " alice waits for GPU 0 only) ran out; queue: %s", s.queueView()).contains("gsu-bob")
                        .doesNotContain("gsu-alice");
            } finally {
                s.release(carol, carols.id());
            }
        }
    }
}
