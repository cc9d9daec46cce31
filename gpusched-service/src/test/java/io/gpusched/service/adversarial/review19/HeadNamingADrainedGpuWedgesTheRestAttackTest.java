package io.gpusched.service.adversarial.review19;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
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
 * Review19: the same wedge with no other user at all. An admin drains GPU 0 for maintenance (days, maybe). Alice asks,
 * with a wait of years, for GPUs 0 and 1 by name. Her request cannot be served until GPU 0 is undrained (DEVICE_BUSY,
 * a transient refusal, so it stays the fair head), and it can only ever use GPUs 0 and 1; yet GPU 1 being free and
 * hers to use (FairQueue.holdsBack rules 1 and 2), it holds back all free GPUs: bob's 1-GPU request is refused
 * INSUFFICIENT_GPUS while GPUs 1 to 7 are idle, for the whole maintenance.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class HeadNamingADrainedGpuWedgesTheRestAttackTest {

    @Test
    void aWaitingRequestNamingADrainedGpuDoesNotKeepGpus2To7FromBob(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300)))) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 61932, false);
            Caller bob = ServiceBed.caller("gsu-bob", 61933, false);
            assertThat(s.drain(ServiceBed.root(), 0, "maintenance")).isTrue();
            Allocation once = s.allocate(bob, GpuRequests.fromCliFlags(List.of("--gpu=1")), Optional.empty(),
                    () -> false);
            s.release(bob, once.id());

            try (Queued hers = Queued.queue(s, alice, "--devices=0,1");
                 Now bobs = Now.ask(s, bob, "--gpu=1")) {
                assertThat(bobs.granted).as("bob's 1-GPU request, GPUs 1 to 7 free, GPU 0 drained by an admin and"
                        + " alice waiting for GPUs 0 and 1 by name (queue: %s); refused: %s", s.queueView(),
                        bobs.refusal()).isPresent();
            } finally {
                s.undrain(ServiceBed.root(), 0);
            }
        }
    }
}
