package io.gpusched.service.adversarial.review31;

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
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review31: since 9be07280 the per-user limit of waiting requests (FairQueue.MAX_PER_USER, 256) goes by the request's
 * owner (FairQueue.enqueue: byUser.computeIfAbsent(ownerUid)), so requests an admin queues FOR alice
 * ({@code --owner=alice}, held open by the admin's own clients) fill alice's limit: alice's own request is refused
 * RATE_LIMITED, "alice has 256 request(s) waiting ... wait for some to be served", though she has none of her own,
 * cannot cancel the admin's (they end only with the admin's clients) and the text does not say who queued them.
 * Before 9be07280 the limit went by caller. Issue 33: "no user can stall other users' grants"; "every refusal typed,
 * naming who may act". (An admin is needed: a plain user cannot name another owner.)
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class AdminQueuedRequestsFillTheOwnersWaitingLimitAttackTest {

    @Test
    void aUsersOwnRequestIsQueuedThoughAnAdminQueuedTheLimitForThem(@TempDir Path tmp) throws Exception {
        Assumptions.assumeTrue(LocalUsers.available(), "needs root, useradd and setpriv");
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300)))) {
            LocalUsers.User aliceUser = bed.accounts.user("alice");
            NodeService s = bed.start();
            Caller root = ServiceBed.root();
            Caller alice = ServiceBed.caller(aliceUser, false);
            Caller carol = ServiceBed.caller("gsu-carol", 63123, false);
            Allocation full = s.allocate(carol, GpuRequests.fromCliFlags(List.of("--gpu=8")), Optional.empty(),
                    () -> false);
            AtomicBoolean adminGone = new AtomicBoolean();
            List<CompletableFuture<Allocation>> admins = new ArrayList<>();
            Queued own = null;
            try {
                for (int i = 0; i < 256; i++) {
                    CompletableFuture<Allocation> f = new CompletableFuture<>();
                    admins.add(f);
                    Thread t = new Thread(() -> {
                        try {
                            f.complete(s.allocate(root, GpuRequests.fromCliFlags(List.of("--gpu=8", "--owner="
                                    + aliceUser.name())), Optional.of(Duration.ofMinutes(10)), adminGone::get));
                        } catch (Throwable e) {
                            f.completeExceptionally(e);
                        }
                    });
                    t.setDaemon(true);
                    t.start();
                }
                assertThat(Clients.await(() -> s.queueView().size() >= 256 || admins.stream().anyMatch(
                        CompletableFuture::isDone), 60)).as("the admin's 256 requests for alice wait").isTrue();
                assertThat(admins.stream().noneMatch(CompletableFuture::isDone)).as("none of the admin's refused")
                        .isTrue();
                own = Queued.queue(s, alice, "--gpu=1");
                assertThat(own.result).as("alice's own first request, after an admin queued 256 for her; queue size"
                        + " %s", s.queueView().size()).isNotDone();
            } finally {
                adminGone.set(true);
                if (own != null) {
                    own.gone.set(true);
                }
                for (CompletableFuture<Allocation> f : admins) {
                    if (Clients.await(f::isDone, 30) && !f.isCompletedExceptionally()) {
                        s.release(root, f.join().id());
                    }
                }
                s.release(carol, full.id());
            }
        }
    }
}
