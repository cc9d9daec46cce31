package io.gpusched.service.adversarial.queue;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.UserQuotas;
import io.gpusched.server.Caller;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.testing.OwnThread;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * docs/SERVICE.md, "Quotas and the fair queue": "Order is strict: when the next request does not fit, nothing later
 * is tried ahead of it (no backfilling, so a large request is never starved by small ones)". A hostile user who never
 * queues (a plain {@code gpusched allocate}, retried) is "later" than every waiting request, yet the service serves it
 * with a plain allocate that never looks at its own queue. Callers are made by hand as the transport makes them (no
 * socket or root needed: the subject is the service's ordering).
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class QueueJumpAttackTest {

    @Test
    void aRequestThatDoesNotWaitIsNotServedAheadOfAWaitingOneThatDoesNotFitYet(@TempDir Path tmp) throws Exception {
        GpuConfig config = GpuConfig.builder().users(UserQuotas.none()).build();
        try (ServiceBed bed = new ServiceBed(tmp, config)) {
            NodeService s = bed.start();
            Caller carol = ServiceBed.caller("gsu-carol", 61001, false);
            Caller alice = ServiceBed.caller("gsu-alice", 61002, false);
            Caller bob = ServiceBed.caller("gsu-bob", 61003, false);
            Allocation held = s.allocate(carol, GpuRequests.fromCliFlags(List.of("--gpu=4")), Optional.empty(),
                    () -> false);
            // alice asks for the whole node and waits, first in the queue
            CompletableFuture<Allocation> whole = OwnThread.supply(() -> {
                try {
                    return s.allocate(alice, GpuRequests.fromCliFlags(List.of("--gpu=8")), Optional.of(Duration
                            .ofMinutes(1)), () -> false);
                } catch (InterruptedException e) {
                    throw new IllegalStateException(e);
                }
            });
            for (int i = 0; i < 6000 && s.queueView().isEmpty(); i++) { // up to 60 s: a loaded machine
                Thread.sleep(10);
            }
            assertThat(s.queueView()).hasSize(1);
            // bob, later, does not wait: with 4 GPUs free he is served ahead of alice, and every GPU he takes keeps
            // her 8-GPU request from ever fitting (he can repeat this forever: release, allocate again)
            Optional<Allocation> jumped = Optional.empty();
            GpuAllocationException refused = null;
            try {
                jumped = Optional.of(s.allocate(bob, GpuRequests.fromCliFlags(List.of("--gpu=1")), Optional.empty(),
                        () -> false));
            } catch (GpuAllocationException e) {
                refused = e;
            }
            try {
                assertThat(jumped).as("bob's later 1-GPU request that does not wait was granted GPUs %s while alice's"
                        + " earlier 8-GPU request waited at the head of the queue %s (refusal: %s)",
                        jumped.map(Allocation::deviceIndices).orElse(null), s.queueView(), refused).isEmpty();
            } finally {
                jumped.ifPresent(j -> s.scheduler().release(j.id()));
                s.scheduler().release(held.id());
                Allocation a = whole.get(1, TimeUnit.MINUTES);
                s.scheduler().release(a.id());
            }
        }
    }
}
