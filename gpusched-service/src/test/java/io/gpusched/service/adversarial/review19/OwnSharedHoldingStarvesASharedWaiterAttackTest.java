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
 * Review19: FairQueue.holdsBack's rule (2) counts every GPU its user holds, shared or not, as one the request "waits
 * on its own user" for. That is true of an exclusive request, not of a shared one: bob's small shared allocation on
 * each GPU (32 GiB V100s; 1 GiB each) does not keep his second shared request (16 GiB) from any GPU. Alice holds 15.5
 * GiB shared on every GPU, so bob's 16 GiB does not fit (15.5 GiB left). His request is the fair head (bob was served
 * before alice), yet, all eight GPUs being "his own", it holds nothing back: alice's next 15.5 GiB request is granted
 * around him, and she releases the older one. Each of her releases leaves 15.5 GiB free, never 16 GiB: bob is never
 * served. With the strict order, her second request is refused and her first release serves bob.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class OwnSharedHoldingStarvesASharedWaiterAttackTest {

    @Test
    void aSharedWaiterWhoKeepsASmallSharedAllocationIsNotPassedOver(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300)))) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 61912, false);
            Caller bob = ServiceBed.caller("gsu-bob", 61913, false);
            assertThat(s.scheduler().devices()).allSatisfy(d -> assertThat(d.device().memory().bytes()).isEqualTo(
                    32L << 30));
            Allocation bobsSmall = s.allocate(bob, GpuRequests.fromCliFlags(List.of("--gpu=8", "--shared=1024MiB")),
                    Optional.empty(), () -> false);
            List<String> big = List.of("--gpu=8", "--shared=15872MiB");
            Allocation held = s.allocate(alice, GpuRequests.fromCliFlags(big), Optional.empty(), () -> false);

            AtomicBoolean bobGone = new AtomicBoolean();
            CompletableFuture<Allocation> bobs = new CompletableFuture<>();
            Thread t = new Thread(() -> {
                try {
                    bobs.complete(s.allocate(bob, GpuRequests.fromCliFlags(List.of("--gpu=1", "--shared=16384MiB")),
                            Optional.of(Duration.ofMinutes(10)), bobGone::get));
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
                        next = s.allocate(alice, GpuRequests.fromCliFlags(big), Optional.empty(), () -> false);
                        log.add("alice's request " + round + " granted " + next.id());
                    } catch (GpuAllocationException e) {
                        log.add("alice's request " + round + " refused " + e.reason());
                    }
                    if (held != null) {
                        s.release(alice, held.id());
                        log.add("alice released " + held.id());
                    }
                    held = next;
                }
                Clients.await(bobs::isDone, 20);
                assertThat(bobs).as("bob's 16 GiB shared request (the fair head, waiting; bob keeps 1 GiB shared on"
                        + " each GPU) after two of alice's releases; %s; queue now %s", log, s.queueView())
                        .isCompleted();
            } finally {
                bobGone.set(true);
                if (bobs.isDone() && !bobs.isCompletedExceptionally()) {
                    s.release(bob, bobs.join().id());
                }
                if (held != null) {
                    s.release(alice, held.id());
                }
                s.release(bob, bobsSmall.id());
            }
        }
    }
}
