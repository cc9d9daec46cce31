package io.gpusched.service.adversarial.review24;

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
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review24: review21's "the cap bounds a pass; it must not decide who is ever tried", across users. Review22's
 * backfillBehind tries every user's second request, then every user's third, ..., but stops at 64 tries a pass
 * ({@code if (++tries > BATCH) return false}) and the next pass starts again from the same users in the same order.
 * Carol holds GPU 0. 64 users each wait for GPU 0 twice (their first and second requests hopeless while carol holds
 * it); bob, last in fair order (served most recently), waits for GPU 0, then for any one GPU. GPUs 1 to 7 are idle
 * and kept for no one, yet every pass spends its 64 tries on the others' second requests and never reaches bob's.
 */
@Tag("adversarial")
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class OtherUsersSecondRequestsPastTheBatchStallBackfillAttackTest {
    /** FairQueue.BATCH. */
    private static final int BATCH = 64;

    @Test
    void bobsSecondRequestIsTriedWhateverNumberOfUsersWaitAheadOfHim(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300)))) {
            NodeService s = bed.start();
            Caller bob = ServiceBed.caller("gsu-bob", 62440, false);
            Caller carol = ServiceBed.caller("gsu-carol", 62441, false);
            Allocation carols = s.allocate(carol, GpuRequests.fromCliFlags(List.of("--devices=0")), Optional.empty(),
                    () -> false);
            // bob served last: behind every other user (never served) in fair order
            s.release(bob, s.allocate(bob, GpuRequests.fromCliFlags(List.of("--gpu=1")), Optional.empty(),
                    () -> false).id());
            List<Queued> others = new ArrayList<>();
            try {
                for (int u = 0; u < BATCH; u++) {
                    Caller c = ServiceBed.caller("gsu-u" + u, 62450 + u, false);
                    others.add(Queued.queue(s, c, "--devices=0"));
                    others.add(Queued.queue(s, c, "--devices=0"));
                }
                try (Queued first = Queued.queue(s, bob, "--devices=0");
                     Queued any = Queued.queue(s, bob, "--gpu=1")) {
                    boolean served = Clients.await(any.result::isDone, 20);
                    int waiting = s.queueView().size();
                    first.gone.set(true);
                    assertThat(served && !any.result.isCompletedExceptionally()).as("bob's second waiting request (any"
                            + " one GPU), GPUs 1 to 7 idle and kept for no one, %s requests waiting (64 users' two for"
                            + " GPU 0, bob's first for GPU 0); result: %s", waiting, any.result).isTrue();
                }
            } finally {
                for (Queued q : others) {
                    q.gone.set(true);
                }
                s.release(carol, carols.id());
            }
        }
    }
}
