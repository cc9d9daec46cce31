package io.gpusched.service.adversarial.review27;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.GpuHealth;
import io.gpusched.server.Caller;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.adversarial.review10.Clients;
import io.gpusched.service.adversarial.review10.Now;
import io.gpusched.service.adversarial.review10.Queued;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review27: the fair queue's dispatcher tries its requests again only when woken: on a new request, a release handed
 * to it, or an event of the scheduler (NodeService's listener wakes it on every event but ALLOCATED, REJECTED and
 * RENEWED); its tick only refreshes the ledger. A GPU's health is not in the ledger, and HealthTracker.update emits a
 * HEALTH_CHANGED event only for the live allocations holding the GPU: the health of an IDLE GPU changes without any
 * event, so nothing wakes the queue. GPU 3 is unhealthy (an XID); alice waits for it (DEVICE_UNHEALTHY is transient:
 * she is queued). GPU 3 recovers and sits idle, healthy; alice's request is never tried again until some unrelated
 * change comes (or her wait runs out, refused as "only 0 of 1 suitable GPUs are healthy", false by then). Promise
 * (issue 33): a waiting request is served when the node can serve it (the queue grants on every change).
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class HealedIdleGpuNeverWakesTheQueueAttackTest {

    @Test
    void aRequestWaitingForAnUnhealthyIdleGpuIsServedOnceItRecovers(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300)))) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 62711, false);
            Caller bob = ServiceBed.caller("gsu-bob", 62712, false);
            bed.inventory.setHealth(3, GpuHealth.unhealthy("XID 79: fallen off the bus (simulated)"));
            try (Queued w = Queued.queue(s, alice, "--devices=3")) {
                assertThat(w.result).as("GPU 3 unhealthy: alice's request for it waits").isNotDone();
                // bob's request without a wait goes through the same dispatcher pass, behind alice's (tried first):
                // once he is answered, alice's request has been tried on the unhealthy GPU; nothing in the ledger
                // changes (his is refused), so no event follows
                try (Now bobs = Now.ask(s, bob, "--devices=3")) {
                    assertThat(bobs.refused).as("bob's request for the unhealthy GPU 3, without a wait").isNotNull();
                }
                assertThat(w.result).as("alice's request still waits for GPU 3").isNotDone();
                bed.inventory.setHealth(3, GpuHealth.HEALTHY); // the GPU recovers; it is idle
                boolean served = Clients.await(w.result::isDone, 30);
                assertThat(served && !w.result.isCompletedExceptionally()).as("alice's request for GPU 3, healthy and"
                        + " idle for 30 s (nobody else on the node); GPU 3 now: %s; queue: %s; result: %s",
                        bed.scheduler.devices().get(3).health(), s.queueView(), w.result).isTrue();
            }
        }
    }
}
