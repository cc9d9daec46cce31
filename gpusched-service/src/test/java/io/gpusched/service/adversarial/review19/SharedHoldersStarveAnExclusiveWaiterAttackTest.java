package io.gpusched.service.adversarial.review19;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuRequests;
import io.gpusched.server.Caller;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.adversarial.review10.Clients;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
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
 * Review19: FairQueue.holdsBack's rule (1), "some GPU free now could serve it", counts a GPU as free for an exclusive
 * request only when it is idle. Alice keeps a small shared allocation on every GPU; bob (never served, so the fair
 * head) waits for one exclusive GPU. No GPU is idle, so bob's request holds nothing back, and alice's next shared
 * request, queued behind bob in fair order, is granted around him. She then releases the older one: her releases never
 * leave a GPU idle, so bob is never served, however many releases come ("alice queues 20, bob then 1: bob is served by
 * the second release at the latest"). With the strict order (nothing granted around a fair head that does not fit),
 * her second shared request is refused and her first release serves bob.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class SharedHoldersStarveAnExclusiveWaiterAttackTest {

    @Test
    void rollingSharedAllocationsDoNotStarveAnExclusiveWaiterPastTwoReleases(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300)))) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 61902, false);
            Caller bob = ServiceBed.caller("gsu-bob", 61903, false);
            List<String> shared = List.of("--gpu=8", "--shared=1024MiB");
            Allocation held = s.allocate(alice, GpuRequests.fromCliFlags(shared), Optional.empty(), () -> false);

            AtomicBoolean bobGone = new AtomicBoolean();
            CompletableFuture<Allocation> bobs = new CompletableFuture<>();
            Thread t = new Thread(() -> {
                try {
                    bobs.complete(s.allocate(bob, GpuRequests.fromCliFlags(List.of("--gpu=1")), Optional.of(Duration
                            .ofMinutes(10)), bobGone::get));
                } catch (Throwable e) {
                    bobs.completeExceptionally(e);
                }
            });
            t.setDaemon(true);
            t.start();
            assertThat(Clients.await(() -> !s.queueView().isEmpty() || bobs.isDone(), 60)).isTrue();

            List<String> log = new ArrayList<>();
            try {
                for (int round = 1; round <= 2 && !bobs.isDone(); round++) {
                    Allocation next = null;
                    try {
                        next = s.allocate(alice, GpuRequests.fromCliFlags(shared), Optional.empty(), () -> false);
                        log.add("alice's shared request " + round + " granted " + next.id() + " " + next
                                .deviceIndices());
                    } catch (GpuAllocationException e) {
                        log.add("alice's shared request " + round + " refused " + e.reason());
                    }
                    if (held != null) {
                        s.release(alice, held.id());
                        log.add("alice released " + held.id());
                    }
                    held = next;
                }
                Clients.await(bobs::isDone, 20);
                assertThat(bobs).as("bob's exclusive 1-GPU request (the fair head, waiting) after two of alice's"
                        + " releases; %s; queue now %s; devices %s", log, s.queueView(), s.scheduler().devices())
                        .isCompleted();
            } finally {
                bobGone.set(true);
                if (bobs.isDone() && !bobs.isCompletedExceptionally()) {
                    s.release(bob, bobs.join().id());
                }
                if (held != null) {
                    s.release(alice, held.id());
                }
            }
        }
    }
}
