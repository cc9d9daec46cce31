package io.gpusched.service.adversarial.review26;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
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
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review26: the "just like" shortcut of FairQueue.backfillBehind (commit 1d746fe3) takes two requests as alike when
 * they have the same usable GPUs, count, sharing and shared memory; it leaves out {@code requiredDevices}, and usable()
 * ignores them too. Carol holds GPU 7; alice holds GPU 0. Alice and bob each wait first for GPU 7 (carol's: their
 * heads, short). Alice's second request is "2 GPUs including GPU 0" (short: GPU 0 is her own); bob's second is "any 2
 * GPUs", which GPUs 1 to 6 (idle, wanted by no request ahead that could be served) would fit. The pass finds alice's
 * short, records its shape, and never tries bob's, "just like" it; keptFor also keeps all 8 GPUs for alice's (it
 * counts GPU 0 as one she could get). Bob waits with 6 GPUs idle for as long as alice keeps GPU 0 (her own choice).
 * Promise (issue 33, docs/SERVICE.md): a later request is tried on what is kept for no request ahead of it that could
 * be served; a user's own holding keeps nothing from others.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class RequiredGpuShapeSkipsALaterRequestThatFitsAttackTest {

    @Test
    void bobsSecondRequestForAny2GpusIsServedBesideAlicesThatMustHaveHerOwnGpu(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300)))) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 62651, false);
            Caller bob = ServiceBed.caller("gsu-bob", 62652, false);
            Caller carol = ServiceBed.caller("gsu-carol", 62653, false);
            Allocation carols = s.allocate(carol, GpuRequests.fromCliFlags(List.of("--devices=7")), Optional.empty(),
                    () -> false);
            Allocation hers = s.allocate(alice, GpuRequests.fromCliFlags(List.of("--devices=0")), Optional.empty(),
                    () -> false);
            // bob served after alice: she is the least recently served, her requests first in each round
            Allocation once = s.allocate(bob, GpuRequests.fromCliFlags(List.of("--gpu=1")), Optional.empty(),
                    () -> false);
            s.release(bob, once.id());
            AtomicBoolean aliceGone = new AtomicBoolean();
            CompletableFuture<Allocation> required = new CompletableFuture<>();
            try (Queued aliceHead = Queued.queue(s, alice, "--devices=7");
                 Queued bobHead = Queued.queue(s, bob, "--devices=7")) {
                int before = s.queueView().size();
                Thread t = new Thread(() -> {
                    try {
                        required.complete(s.allocate(alice, GpuRequest.builder().count(2).requiredDevices(0).build(),
                                Optional.of(Duration.ofMinutes(10)), aliceGone::get));
                    } catch (Throwable e) {
                        required.completeExceptionally(e);
                    }
                });
                t.setDaemon(true);
                t.start();
                assertThat(Clients.await(() -> s.queueView().size() > before || required.isDone(), 60)).isTrue();
                try (Queued any2 = Queued.queue(s, bob, "--gpu=2")) {
                    boolean served = Clients.await(any2.result::isDone, 20);
                    assertThat(served && !any2.result.isCompletedExceptionally()).as("bob's second request (any 2"
                            + " GPUs), GPUs 1 to 6 idle; alice's second (2 GPUs including GPU 0, which she holds) is"
                            + " short; queue: %s; result: %s; alice's: %s", s.queueView(), any2.result, required)
                            .isTrue();
                } finally {
                    aliceGone.set(true);
                    if (Clients.await(required::isDone, 30) && !required.isCompletedExceptionally()) {
                        s.release(alice, required.join().id());
                    }
                }
            } finally {
                s.release(alice, hers.id());
                s.release(carol, carols.id());
            }
        }
    }
}
