package io.gpusched.service;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationEvent;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.UserQuotas;
import io.gpusched.server.Caller;
import io.gpusched.testing.OwnThread;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A request that does not wait, made while nothing waits, is tried in its caller's thread (no hand-over to the
 * dispatcher and back), and the queue's close still waits for such a grant under way: nothing is granted once the
 * stop returned. The scheduler's listeners run in the thread that made the change, so a listener sees which thread
 * that was, and a listener that blocks holds the grant in flight.
 */
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class FairQueueDirectTest {

    @Test
    void aRequestThatDoesNotWaitWhileNothingWaitsIsMadeInTheCallersThread(@TempDir Path tmp) throws Exception {
        Caller alice = ServiceBed.caller("gsu-alice", 62101, false);
        try (ServiceBed bed = new ServiceBed(tmp, GpuConfig.builder().users(UserQuotas.none()).build())) {
            NodeService s = bed.start();
            List<String> threads = new CopyOnWriteArrayList<>();
            bed.scheduler.addListener(e -> {
                if (e.type() == AllocationEvent.Type.ALLOCATED) {
                    threads.add(Thread.currentThread().getName());
                }
            });
            Allocation a = s.allocate(alice, GpuRequests.fromCliFlags("--gpu=1"), Optional.empty(), () -> false);
            assertThat(a.owner()).contains("gsu-alice");
            assertThat(threads).containsExactly(Thread.currentThread().getName());
        }
    }

    @Test
    void theStopWaitsForAGrantMadeInItsCallersThread(@TempDir Path tmp) throws Exception {
        Caller alice = ServiceBed.caller("gsu-alice", 62102, false);
        try (ServiceBed bed = new ServiceBed(tmp, GpuConfig.builder().users(UserQuotas.none()).build())) {
            NodeService s = bed.start();
            // the grant is made (on the ledger) but its caller has not been answered while it is held
            HeldEvents hold = new HeldEvents(bed.scheduler, AllocationEvent.Type.ALLOCATED, Integer.MAX_VALUE);
            CompletableFuture<Allocation> granted = OwnThread.supply(() -> {
                try {
                    return s.allocate(alice, GpuRequests.fromCliFlags("--gpu=1"), Optional.empty(), () -> false);
                } catch (InterruptedException e) {
                    throw new IllegalStateException(e);
                }
            });
            assertThat(hold.awaitHeld(1)).as("the grant began").isTrue();
            CompletableFuture<Void> stop = OwnThread.run(s::stop);
            // the stop cannot end while the grant is under way: it waits for it (any time would do; it never ends
            // before letGo, as the grant holds it)
            Thread.sleep(300);
            assertThat(stop).as("the stop returned while a grant was under way").isNotDone();
            hold.letGo();
            stop.get(60, TimeUnit.SECONDS);
            assertThat(granted.get(60, TimeUnit.SECONDS).owner()).contains("gsu-alice");
            hold.close();
        }
    }
}
