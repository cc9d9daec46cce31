package io.gpusched.service.adversarial.review20;

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
 * Review20: review19's drained-GPU wedge, by count instead of by name. An admin drains GPU 0 for maintenance (days,
 * maybe). Alice queues a request for 8 GPUs: it cannot be served until GPU 0 is undrained, yet all 8 are kept for it
 * (GpuRequest.couldUse ignores the pool), so GPUs 1 to 7 sit idle for the whole maintenance and bob's 1-GPU request is
 * refused. Review19 fixed the case where the head names the drained GPU; a request by count wedges the node the same
 * way. The docs list "a drained one it names" among the GPUs that do not sit idle behind a request.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class WholeNodeRequestIdlesTheNodeThroughADrainAttackTest {

    @Test
    void aWholeNodeRequestDoesNotKeepSevenGpusIdleWhileAnAdminDrainsOne(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300)))) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 62011, false);
            Caller bob = ServiceBed.caller("gsu-bob", 62012, false);
            assertThat(s.drain(ServiceBed.root(), 0, "maintenance")).isTrue();
            Allocation once = s.allocate(bob, GpuRequests.fromCliFlags(List.of("--gpu=1")), Optional.empty(),
                    () -> false); // bob was served: alice, never served, is the fair next
            s.release(bob, once.id());
            try (Queued all = Queued.queue(s, alice, "--gpu=8")) {
                try (Now bobs = Now.ask(s, bob, "--gpu=1")) {
                    assertThat(bobs.granted).as(
                            "bob's 1-GPU request, GPUs 1 to 7 free, GPU 0 drained by an admin and alice"
                                    + " waiting for 8 (queue: %s); refused: %s",
                            s.queueView(),
                            bobs.refusal()).isPresent();
                } finally {
                    all.gone.set(true);
                    s.undrain(ServiceBed.root(), 0);
                }
            }
        }
    }
}
