package io.gpusched.service.adversarial.review29;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequests;
import io.gpusched.server.Caller;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.adversarial.review10.Clients;
import io.gpusched.service.adversarial.review10.Queued;
import io.gpusched.testing.LocalUsers;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review29: the fair queue is fair across CALLERS, not across the users who own the requests. FairQueue files every
 * ticket under {@code caller.uid()} (FairQueue.enqueue, byUser; lastGrant in finish/direct), while the allocation, the
 * quota and everything else belongs to the request's owner ({@code --owner}, which an admin may name: NodeService
 * .ownedBy). An admin (an engine's service account, a batch front end, root) queues, for alice, three requests for the
 * whole node, then one for bob. They are one user's queue, first come first served: bob is served at the fourth release,
 * not by the second. SERVICE.md: "Waiting requests are served round-robin across users, least recently served first
 * ... alice's twenty queued ... requests and then bob's one: bob is served at the first release"; issue 33: "bob is
 * served by the second release at the latest".
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class AdminQueuedRequestsOfTwoUsersShareOneFairTurnAttackTest {

    @Test
    void bobsRequestQueuedByAnAdminIsServedByTheSecondRelease(@TempDir Path tmp) throws Exception {
        Assumptions.assumeTrue(LocalUsers.available(), "needs root, useradd and setpriv");
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300)))) {
            LocalUsers.User alice = bed.accounts.user("alice");
            LocalUsers.User bob = bed.accounts.user("bob");
            NodeService s = bed.start();
            Caller root = ServiceBed.root();
            Caller carol = ServiceBed.caller("gsu-carol", 62911, false);
            Allocation full = s.allocate(carol, GpuRequests.fromCliFlags(List.of("--gpu=8")), Optional.empty(),
                    () -> false);
            List<Queued> alices = new ArrayList<>();
            Queued bobs = null;
            try {
                for (int i = 0; i < 3; i++) {
                    alices.add(Queued.queue(s, root, "--gpu=8", "--owner=" + alice.name()));
                }
                bobs = Queued.queue(s, root, "--gpu=8", "--owner=" + bob.name());
                // release 1: alice's first is served (she was first to queue)
                s.release(carol, full.id());
                Queued first = alices.get(0);
                assertThat(Clients.await(first.result::isDone, 20) && !first.result.isCompletedExceptionally())
                        .as("alice's first request, after carol's release: %s", first.result).isTrue();
                Allocation a1 = first.result.join();
                assertThat(a1.owner()).contains(alice.name());
                // release 2: bob's turn, by the promise
                s.release(root, a1.id());
                Queued b = bobs;
                boolean someone = Clients.await(() -> b.result.isDone() || alices.get(1).result.isDone(), 20);
                assertThat(someone && b.result.isDone() && !b.result.isCompletedExceptionally()).as("after the"
                        + " second release: bob's request (queued by an admin for bob) %s; alice's second (queued"
                        + " by the same admin for alice) %s; queue %s", b.result, alices.get(1).result,
                        s.queueView()).isTrue();
            } finally {
                for (Queued q : alices) {
                    q.close();
                }
                if (bobs != null) {
                    bobs.close();
                }
                s.release(carol, full.id()); // false once released

            }
        }
    }
}
