package io.gpusched.service.adversarial.review27;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuRequest;
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
 * Review27: review24's rule "a refusal blames the queue only when a FREE GPU the request could use is kept and enough
 * are free without keeping", for a request that must include given GPUs. FairQueue.keeperDepriving asks
 * FairQueue.freeFor, which counts the free GPUs the request could use (usable: GpuRequest.couldUse, which ignores
 * requiredDevices) but not whether the GPUs it MUST have are free. Carol holds GPU 0; dave waits for all 8 GPUs (the
 * 7 free ones are kept for him). Alice asks, without a wait, for 2 GPUs including GPU 0: whatever the queue keeps, she
 * cannot be served while carol holds GPU 0, and the scheduler alone says so. The answer instead says "the GPUs free
 * now are owed to the node service's queue, where gsu-dave waits for 8 GPUs ... ask with a wait (--wait DURATION) to
 * queue fairly behind it": false (nothing kept is what she lacks; queueing behind dave gets her nothing sooner).
 * Refusals must be true (issue 33).
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class RequiredBusyGpuRefusalBlamesTheQueueAttackTest {

    @Test
    void aRequestWhoseRequiredGpuIsHeldIsNotToldTheQueueKeepsWhatItLacks(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300)))) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 62731, false);
            Caller carol = ServiceBed.caller("gsu-carol", 62733, false);
            Caller dave = ServiceBed.caller("gsu-dave", 62734, false);
            Allocation carols = s.allocate(carol, GpuRequests.fromCliFlags(List.of("--devices=0")), Optional.empty(),
                    () -> false);
            GpuRequest withGpu0 = GpuRequest.builder().count(2).requiredDevices(0).build();
            // the truth, with nothing waiting: GPU 0 is carol's, so the scheduler refuses it on its own
            GpuAllocationException alone = null;
            try {
                Allocation a = s.allocate(alice, withGpu0, Optional.empty(), () -> false);
                s.release(alice, a.id());
            } catch (GpuAllocationException e) {
                alone = e;
            }
            assertThat(alone).as("2 GPUs including carol's GPU 0, nothing waiting").isNotNull();
            try (Queued whole = Queued.queue(s, dave, "--gpu=8")) {
                try (Now hers = Now.ask(s, alice, withGpu0)) {
                    assertThat(hers.refused).as("2 GPUs including carol's GPU 0, dave waiting").isNotNull();
                    assertThat(hers.refused.getMessage()).as("alice's refusal (%s) while dave waits; without him it"
                            + " was: %s %s", hers.refused.reason(), alone.reason(), alone.getMessage())
                            .doesNotContain("owed to the node service's queue");
                }
            } finally {
                s.release(carol, carols.id());
            }
        }
    }
}
