package io.gpusched.service.adversarial.review22;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequests;
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
 * Review22: the backfilling of later requests ignores the fair order BETWEEN users. FairQueue.backfillBehind walks the
 * heads in fair order and, for each, tries ALL of that user's later requests (up to 8) before the next user's, adding
 * what each one that does not fit could use to the GPUs kept ({@code withheld.addAll(keptFor(t))}). So alice's THIRD
 * request keeps GPUs from bob's SECOND, though bob's second comes before it in the fair order the queue itself
 * projects (GET /api/v1/queue: alice 1, bob 1, alice 2, bob 2, alice 3).
 *
 * <p>Carol holds GPU 0. Alice (ahead of bob: served less recently) waits for GPU 0, again for GPU 0, then for all 8
 * GPUs; bob waits for GPU 0, then for any one GPU. Ahead of bob's second request are only requests for GPU 0, so GPUs 1
 * to 7 are kept for no request ahead of it; yet it is never served while carol holds GPU 0, because alice's 8-GPU
 * request, behind it, keeps them all. Promise (docs/SERVICE.md): "a user's later waiting requests are tried ... on what
 * is kept for no request ahead of them"; one user's backlog must not jump another user's place.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class LaterLargeRequestKeepsGpusFromAnEarlierOneAttackTest {

    @Test
    void bobsSecondRequestIsNotHeldBackByAlicesThirdWhichComesAfterIt(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300)))) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 62211, false);
            Caller bob = ServiceBed.caller("gsu-bob", 62212, false);
            Caller carol = ServiceBed.caller("gsu-carol", 62213, false);
            Allocation carols = s.allocate(carol, GpuRequests.fromCliFlags(List.of("--devices=0")), Optional.empty(),
                    () -> false);
            // alice served before bob: alice is ahead of bob in fair order
            s.release(alice, s.allocate(alice, GpuRequests.fromCliFlags(List.of("--gpu=1")), Optional.empty(),
                    () -> false).id());
            s.release(bob, s.allocate(bob, GpuRequests.fromCliFlags(List.of("--gpu=1")), Optional.empty(),
                    () -> false).id());
            try (Queued a1 = Queued.queue(s, alice, "--devices=0");
                 Queued a2 = Queued.queue(s, alice, "--devices=0");
                 Queued a3 = Queued.queue(s, alice, "--gpu=8");
                 Queued b1 = Queued.queue(s, bob, "--devices=0");
                 Queued b2 = Queued.queue(s, bob, "--gpu=1")) {
                List<Map<String, Object>> order = s.queueView();
                int bobsSecond = positionOf(order, "gsu-bob", "1 GPU");
                int alicesWhole = positionOf(order, "gsu-alice", "8 GPUs");
                if (bobsSecond > 0) { // (not served yet) the queue's own order puts it before alice's 8 GPUs
                    assertThat(bobsSecond).as("the queue's fair order: %s", order).isLessThan(alicesWhole);
                }
                boolean served = Clients.await(b2.result::isDone, 20);
                try {
                    assertThat(served && !b2.result.isCompletedExceptionally()).as("bob's second request (any one GPU),"
                            + " GPUs 1 to 7 idle, ahead of it in fair order only requests for GPU 0 (carol's);"
                            + " queue: %s; bob's second: %s; alice's 8-GPU request: %s", order, b2.result, a3.result)
                            .isTrue();
                } finally {
                    a1.gone.set(true);
                    a2.gone.set(true);
                    a3.gone.set(true);
                    b1.gone.set(true);
                }
            } finally {
                s.release(carol, carols.id());
            }
        }
    }

    private static int positionOf(List<Map<String, Object>> order, String user, String request) {
        return order.stream().filter(v -> user.equals(v.get("user")) && request.equals(v.get("request")))
                .map(v -> ((Number) v.get("position")).intValue()).findFirst().orElse(-1);
    }
}
