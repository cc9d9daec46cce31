package io.gpusched.service.adversarial.review12;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationEvent;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.UserQuotas;
import io.gpusched.server.Caller;
import io.gpusched.service.HeldEvents;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The queue's close promises "nothing is granted or released by the queue once this returns" and, for grants made in
 * callers' threads, keeps that promise even when the stopping thread is interrupted ("still waited for"). The
 * dispatcher's transaction under way is waited for with a plain Thread.join, which an interrupt ends: stop() then
 * returns while the dispatcher is still granting (and the host may close the scheduler next). Here the stopping
 * thread is interrupted (a host's shutdown hook timing out, an executor's shutdownNow) while the dispatcher holds a
 * grant in its transaction.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class InterruptedStopAttackTest {

    @Test
    void anInterruptedStopDoesNotReturnWhileTheDispatcherStillGrants(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, GpuConfig.builder().users(UserQuotas.none()).build())) {
            NodeService s = bed.start();
            Caller hog = ServiceBed.caller("gsu-hog", 66000, false);
            Allocation all = s.allocate(hog, GpuRequests.fromCliFlags("--gpu=8"), Optional.empty(), () -> false);
            List<Thread> waiters = new ArrayList<>();
            for (int i = 0; i < 2; i++) {
                Caller c = ServiceBed.caller("gsu-iw" + i, 66100 + i, false);
                Thread t = new Thread(() -> {
                    try {
                        s.allocate(c, GpuRequests.fromCliFlags("--gpu=1"), Optional.of(Duration.ofMinutes(2)),
                                () -> false);
                    } catch (Exception e) {
                        // refused by the stop
                    }
                }, "review12-iw-" + i);
                t.start();
                waiters.add(t);
            }
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (s.queueView().size() < 2 && System.nanoTime() < until) {
                Thread.sleep(10);
            }
            assertThat(s.queueView()).hasSize(2);
            HeldEvents hold = new HeldEvents(bed.scheduler, AllocationEvent.Type.ALLOCATED, 1);
            // released outside the service (another process of the node would do the same): the dispatcher wakes
            bed.scheduler.release(all.id());
            assertThat(hold.awaitHeld(1)).as("the dispatcher's grant began").isTrue();
            AtomicBoolean grantUnderWayWhenStopReturned = new AtomicBoolean();
            Thread stopper = new Thread(() -> {
                s.stop();
                grantUnderWayWhenStopReturned.set(hold.ended() == 0);
            }, "review12-stopper");
            stopper.start();
            long u2 = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (!(stopper.getState() == Thread.State.TIMED_WAITING && Arrays.stream(stopper.getStackTrace())
                    .anyMatch(f -> f.getClassName().endsWith(".FairQueue") && f.getMethodName().equals("close")))
                    && System.nanoTime() < u2) {
                Thread.sleep(5);
            }
            stopper.interrupt();
            stopper.join(2_000); // a stop that keeps its promise is still waiting for the grant here (one that does
            // not returns at once after the interrupt)
            boolean returnedFirst = !stopper.isAlive();
            hold.letGo();
            stopper.join(60_000);
            for (Thread t : waiters) {
                t.join(60_000);
            }
            hold.close();
            assertThat(returnedFirst && grantUnderWayWhenStopReturned.get()).as("stop() returned (its thread"
                    + " interrupted) while the fair queue's dispatcher was still in its granting transaction")
                    .isFalse();
        }
    }
}
