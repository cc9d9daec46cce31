package io.gpusched.service.adversarial.review27;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuRequests;
import io.gpusched.server.Caller;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.adversarial.review10.Clients;
import io.gpusched.service.adversarial.review10.Now;
import io.gpusched.service.adversarial.review10.Queued;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review27: the other side of the same gap. Carol holds GPU 0; dave waits for all 8 GPUs (kept for him: the node's
 * 7 free ones); bob then waits for 1 GPU, rightly behind dave. GPU 5, idle, turns unhealthy: dave can no longer be
 * served until it recovers, and FairQueue.keptFor then keeps nothing for him ("a GPU ... ailing": review20/26), so
 * bob's request fits on the idle healthy GPUs. But an idle GPU's health change emits no event (HealthTracker.update
 * emits HEALTH_CHANGED only per live allocation on the GPU), so the dispatcher is never woken: bob waits, 6 healthy
 * GPUs idle, for as long as nothing else on the node changes. Promise (issue 33): what a waiting request could never
 * be served on now is not kept from others; no one's grants are stalled.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class UnhealthyIdleGpuLeavesTheQueueKeepingItAttackTest {

    @Test
    void aWaiterBehindAWholeNodeRequestIsServedOnceAnIdleGpuFailsUnderIt(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300)))) {
            NodeService s = bed.start();
            Caller bob = ServiceBed.caller("gsu-bob", 62722, false);
            Caller carol = ServiceBed.caller("gsu-carol", 62723, false);
            Caller dave = ServiceBed.caller("gsu-dave", 62724, false);
            Caller erin = ServiceBed.caller("gsu-erin", 62725, false);
            Allocation carols = s.allocate(carol, GpuRequests.fromCliFlags(List.of("--devices=0")), Optional.empty(),
                    () -> false);
            try (Queued whole = Queued.queue(s, dave, "--gpu=8"); Queued one = Queued.queue(s, bob, "--gpu=1")) {
                // erin's request without a wait (for carol's GPU 0: refused) is tried in a dispatcher pass behind
                // dave's and bob's: once she is answered, bob's has been tried and left waiting, GPU 5 healthy
                try (Now erins = Now.ask(s, erin, "--devices=0")) {
                    assertThat(erins.refused).as("erin's request for carol's GPU 0, without a wait").isNotNull();
                }
                assertThat(s.queueView()).as("dave and bob wait").hasSize(2);
                assertThat(one.result).as("bob's 1 GPU waits behind dave's 8 (all kept for dave)").isNotDone();
                bed.inventory.setHealth(5, GpuHealth.unhealthy("XID 48: double-bit ECC error (simulated)"));
                boolean served = Clients.await(one.result::isDone, 30);
                assertThat(served && !one.result.isCompletedExceptionally()).as("bob's 1-GPU request, 6 healthy"
                        + " GPUs idle, dave's 8 unservable while GPU 5 is unhealthy (nothing kept for it); GPU 5: %s;"
                        + " queue: %s; result: %s", bed.scheduler.devices().get(5).health(), s.queueView(),
                        one.result).isTrue();
            } finally {
                s.release(carol, carols.id());
            }
        }
    }
}
