package io.gpusched.service.adversarial.review21;

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
 * Review21: review20's fix (FairQueue.backfillBehind: a user's later waiting requests are tried around her first on
 * what is kept for no one) stops after 64 tries a pass, counted over all users in fair order, and the next pass starts
 * from the same users in the same order. So one user, within her 256 waiting requests, turns the fix off for everyone
 * behind her: alice queues 70 requests for GPU 0 (held by carol for days); bob waits for GPU 0 too, then for any one
 * GPU. Seven GPUs are free and kept for no one, but every pass spends its 64 tries on alice's hopeless requests and
 * never reaches bob's second one, which waits as long as carol holds GPU 0 — review20's defect, back for bob. The cap
 * bounds a pass; it must not decide who is ever tried.
 */
@Tag("adversarial")
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class AnotherUsersBacklogStallsBackfillPastTheCapAttackTest {

    @Test
    void bobsSecondWaitingRequestIsServedWhateverAliceQueuedAheadOfHim(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300)))) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 62111, false);
            Caller bob = ServiceBed.caller("gsu-bob", 62112, false);
            Caller carol = ServiceBed.caller("gsu-carol", 62113, false);
            Allocation carols = s.allocate(carol, GpuRequests.fromCliFlags(List.of("--devices=0")), Optional.empty(),
                    () -> false);
            List<Queued> all = new ArrayList<>();
            try {
                for (int i = 0; i < 70; i++) { // alice's first is the oldest: she is ahead of bob in fair order
                    all.add(Queued.queue(s, alice, "--devices=0"));
                }
                all.add(Queued.queue(s, bob, "--devices=0"));
                Queued any = Queued.queue(s, bob, "--gpu=1");
                all.add(any);
                boolean served = Clients.await(any.result::isDone, 30);
                assertThat(served && !any.result.isCompletedExceptionally()).as("bob's waiting 1-GPU request, GPUs 1"
                        + " to 7 free and kept for no one, behind his own request for GPU 0 (held by carol) and"
                        + " alice's 70 requests for GPU 0; queue size %s; result: %s", s.queueView().size(),
                        any.result).isTrue();
            } finally {
                for (Queued q : all) {
                    q.gone.set(true);
                }
                for (Queued q : all) {
                    q.close();
                }
                s.release(carol, carols.id());
            }
        }
    }
}
