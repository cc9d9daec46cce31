package io.gpusched.service.adversarial.review24;

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
 * Review24: a request that does not wait is "put in its fair place ... and refused when what it needs is kept for a
 * waiting request AHEAD of it" (FairQueue's class comment, docs/SERVICE.md). FairQueue.refuseUnreached tries such a
 * request with {@code kept.addAll(withheld)}: every GPU kept in the pass, including those backfillBehind kept for
 * other users' LATER requests, which come after it in the queue's own fair order.
 *
 * <p>Carol holds GPU 0. Alice (ahead of bob) waits for GPU 0; bob waits for GPU 0, then for 8 GPUs. The fair order is
 * alice 1, bob 1, alice 2, bob 2. Alice now asks, without a wait, for any one GPU: her request is third in fair order,
 * GPUs 1 to 7 are idle and kept only for bob's 8-GPU request, fourth. Had she asked with a wait, backfillBehind would
 * try it (every user's second, alice's first) before bob's second and serve it. Without a wait she is refused, told
 * the GPUs are owed to the queue.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class NowRequestRefusedForGpusKeptForARequestBehindItAttackTest {

    @Test
    void alicesSecondRequestWithoutAWaitIsNotRefusedForGpusKeptForBobsLaterOne(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300)))) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 62401, false);
            Caller bob = ServiceBed.caller("gsu-bob", 62402, false);
            Caller carol = ServiceBed.caller("gsu-carol", 62403, false);
            Allocation carols = s.allocate(carol, GpuRequests.fromCliFlags(List.of("--devices=0")), Optional.empty(),
                    () -> false);
            for (Caller c : List.of(alice, bob)) { // alice served before bob: she is ahead of him in fair order
                s.release(c, s.allocate(c, GpuRequests.fromCliFlags(List.of("--gpu=1")), Optional.empty(),
                        () -> false).id());
            }
            try (Queued a1 = Queued.queue(s, alice, "--devices=0");
                 Queued b1 = Queued.queue(s, bob, "--devices=0");
                 Queued b2 = Queued.queue(s, bob, "--gpu=8")) {
                List<?> order = s.queueView();
                try (Now hers = Now.ask(s, alice, "--gpu=1")) {
                    assertThat(hers.granted).as(
                            "alice's 1-GPU request without a wait (third in fair order: alice 1, bob 1,"
                                    + " alice 2, bob 2), GPUs 1 to 7 idle and kept only for bob's 8-GPU request, fourth;"
                                    + " queue: %s; refused: %s",
                            order,
                            hers.refusal()).isPresent();
                } finally {
                    a1.gone.set(true);
                    b1.gone.set(true);
                    b2.gone.set(true);
                }
            } finally {
                s.release(carol, carols.id());
            }
        }
    }
}
