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
 * Review29: the other face of AdminQueuedRequestsOfTwoUsersShareOneFairTurn. The fair queue's "user" is the caller's
 * uid (FairQueue.enqueue: byUser.computeIfAbsent(caller.uid()); lastGrant by caller uid), so alice's requests queued
 * for her by an admin ({@code --owner=alice}) and those she queues herself are two users in the round-robin: alice
 * gets two turns to bob's one. The node is full (carol); an admin queues two whole-node requests for alice, alice
 * queues two herself, then bob queues one. Release 1 serves alice (the admin's, first queued); release 2 should be
 * bob's (alice was just served; bob never was), but alice's own lane, never served and older than bob's, goes first:
 * bob is served at the third release. Issue 33: "alice queues 20, bob then 1: bob is served by the second release at
 * the latest".
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class AdminQueuedRequestsGiveTheirOwnerASecondFairTurnAttackTest {

    @Test
    void bobIsServedByTheSecondReleaseThoughAliceQueuesThroughAnAdminToo(@TempDir Path tmp) throws Exception {
        Assumptions.assumeTrue(LocalUsers.available(), "needs root, useradd and setpriv");
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300)))) {
            LocalUsers.User aliceUser = bed.accounts.user("alice");
            NodeService s = bed.start();
            Caller root = ServiceBed.root();
            Caller alice = ServiceBed.caller(aliceUser, false);
            Caller bob = ServiceBed.caller("gsu-bob", 62922, false);
            Caller carol = ServiceBed.caller("gsu-carol", 62923, false);
            Allocation full = s.allocate(carol, GpuRequests.fromCliFlags(List.of("--gpu=8")), Optional.empty(),
                    () -> false);
            List<Queued> alices = new ArrayList<>();
            Queued bobs = null;
            try {
                alices.add(Queued.queue(s, root, "--gpu=8", "--owner=" + aliceUser.name()));
                alices.add(Queued.queue(s, root, "--gpu=8", "--owner=" + aliceUser.name()));
                alices.add(Queued.queue(s, alice, "--gpu=8"));
                alices.add(Queued.queue(s, alice, "--gpu=8"));
                bobs = Queued.queue(s, bob, "--gpu=8");
                s.release(carol, full.id()); // release 1
                Queued first = alices.get(0);
                assertThat(Clients.await(first.result::isDone, 20) && !first.result.isCompletedExceptionally())
                        .as("alice's first request (queued by the admin), after carol's release: %s", first.result)
                        .isTrue();
                Allocation a1 = first.result.join();
                assertThat(a1.owner()).contains(aliceUser.name());
                s.release(alice, a1.id()); // release 2: alice's own GPUs, released by her
                Queued b = bobs;
                boolean someone = Clients.await(() -> b.result.isDone() || alices.stream().skip(1)
                        .anyMatch(q -> q.result.isDone()), 20);
                assertThat(someone && b.result.isDone() && !b.result.isCompletedExceptionally()).as("after the"
                        + " second release (alice was served at the first): bob's %s; alice's (admin's second %s,"
                        + " her own first %s); queue %s", b.result, alices.get(1).result, alices.get(2).result,
                        s.queueView()).isTrue();
            } finally {
                for (Queued q : alices) {
                    q.gone.set(true);
                }
                if (bobs != null) {
                    bobs.gone.set(true);
                }
                for (Queued q : alices) {
                    if (Clients.await(q.result::isDone, 30) && !q.result.isCompletedExceptionally()) {
                        s.release(root, q.result.join().id());
                    }
                }
                if (bobs != null && Clients.await(bobs.result::isDone, 30)
                        && !bobs.result.isCompletedExceptionally()) {
                    s.release(root, bobs.result.join().id());
                }
                s.release(carol, full.id()); // false once released
            }
        }
    }
}
