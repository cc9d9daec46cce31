package io.gpusched.service;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequests;
import io.gpusched.server.Caller;
import io.gpusched.service.adversarial.review10.Clients;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The fair queue's backfilling between waiting requests: when the fair next request does not fit, a request behind it
 * that waits too is served on the GPUs the first could never use, at once, and never on one it could.
 */
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class FairQueueBackfillTest {

    private static CompletableFuture<Allocation> waiting(NodeService s, Caller c, String flag, AtomicBoolean gone) {
        CompletableFuture<Allocation> f = new CompletableFuture<>();
        Thread t = new Thread(() -> {
            try {
                f.complete(s.allocate(c, GpuRequests.fromCliFlags(List.of(flag)), Optional.of(Duration.ofMinutes(10)),
                        gone::get));
            } catch (Throwable e) {
                f.completeExceptionally(e);
            }
        });
        t.setDaemon(true);
        t.start();
        return f;
    }

    @Test
    void aWaitingRequestBehindOneThatDoesNotFitIsServedOnTheGpusTheFirstCouldNeverUse(@TempDir Path tmp)
            throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300)))) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 61952, false);
            Caller bob = ServiceBed.caller("gsu-bob", 61953, false);
            Caller carol = ServiceBed.caller("gsu-carol", 61954, false);
            Allocation carols = s.allocate(carol, GpuRequests.fromCliFlags(List.of("--devices=0")), Optional.empty(),
                    () -> false);
            AtomicBoolean gone = new AtomicBoolean();
            // alice (never served: the fair next) waits for GPUs 0 and 1; GPU 0 is carol's
            CompletableFuture<Allocation> hers = waiting(s, alice, "--devices=0,1", gone);
            assertThat(Clients.await(() -> s.queueView().size() == 1, 60)).as("alice waits").isTrue();
            // bob waits for 6 GPUs: 2 to 7 are free, and alice could never use them
            CompletableFuture<Allocation> his = waiting(s, bob, "--gpu=6", gone);
            assertThat(Clients.await(his::isDone, 60)).as("bob's waiting request, served around alice's (queue: %s)",
                    s.queueView()).isTrue();
            assertThat(his.join().deviceIndices()).as("bob's GPUs").containsExactlyInAnyOrder(2, 3, 4, 5, 6, 7);
            // bob's next waiting request needs one more GPU: only GPU 1 is free, and it is kept for alice
            CompletableFuture<Allocation> more = waiting(s, bob, "--gpu=1", gone);
            assertThat(Clients.await(() -> s.queueView().size() == 2, 60)).as("bob's second request waits: %s",
                    s.queueView()).isTrue();
            assertThat(more.isDone()).as("bob's second request, GPU 1 being alice's to wait for").isFalse();
            s.release(carol, carols.id()); // GPU 0 free: alice is served GPUs 0 and 1 before bob's second request
            assertThat(Clients.await(hers::isDone, 60)).as("alice served once GPU 0 came free").isTrue();
            assertThat(hers.join().deviceIndices()).containsExactlyInAnyOrder(0, 1);
            assertThat(more.isDone()).as("bob's second request: no GPU left").isFalse();
            gone.set(true);
            s.release(alice, hers.join().id());
            s.release(bob, his.join().id());
        }
    }
}
