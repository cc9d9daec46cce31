package io.gpusched.service.adversarial.review20;

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
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review20: backfilling is promised for "the requests after it in fair order, waiting or not", and a request that
 * does not wait, behind its own user's waiting one, is tried on what neither could use. But FairQueue.dispatch only
 * tries each user's oldest request (heads: {@code copy.remove(u).peek()}), so a user's second WAITING request is never
 * tried around her first. Carol holds GPU 0; alice waits for GPU 0 by name (it can only ever use GPU 0), then waits
 * for any one GPU: seven GPUs are free and kept for no one, yet her second request waits as long as carol holds GPU 0
 * (days, a long job), while the same request without a wait would be served at once, and so would anyone else's.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class OwnBlockedWaiterStallsTheUsersOtherWaitersAttackTest {

    @Test
    void aSecondWaitingRequestIsServedAroundTheUsersFirstThatWaitsForABusyGpu(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300)))) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 62031, false);
            Caller carol = ServiceBed.caller("gsu-carol", 62033, false);
            Allocation carols = s.allocate(carol, GpuRequests.fromCliFlags(List.of("--devices=0")), Optional.empty(),
                    () -> false);
            try (Queued pinned = Queued.queue(s, alice, "--devices=0");
                 Queued any = Queued.queue(s, alice, "--gpu=1")) {
                boolean served = Clients.await(any.result::isDone, 20);
                assertThat(served && !any.result.isCompletedExceptionally()).as("alice's waiting 1-GPU request,"
                        + " GPUs 1 to 7 free and kept for no one, behind her own request for GPU 0 (held by carol);"
                        + " queue: %s; result: %s", s.queueView(), any.result).isTrue();
                pinned.gone.set(true);
                any.gone.set(true);
            } finally {
                s.release(carol, carols.id());
            }
        }
    }
}
