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
 * Review20: one user, within every limit (no quota is configured), keeps a whole node from everyone else for as long
 * as she likes. Alice holds one GPU of the 8 (a long job, say) and queues, with a wait of years, a request for all 8.
 * It can only fit once she releases her own GPU: no one else holds anything, so the withholding protects her request
 * from no small request at all. Yet FairQueue.dispatch keeps every GPU it could use (FairQueue.usable: all 8) for it,
 * so bob's 1-GPU request is refused INSUFFICIENT_GPUS with 7 GPUs idle, and stays refused until alice chooses to
 * release. The docs say GPUs "one its own user holds" do not make others wait behind a request.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class OwnHoldingKeepsTheNodeFromEveryoneAttackTest {

    @Test
    void aRequestOnlyItsOwnUsersReleaseCanFitKeepsNoFreeGpuFromBob(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300)))) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 62001, false);
            Caller bob = ServiceBed.caller("gsu-bob", 62002, false);
            Allocation held = s.allocate(alice, GpuRequests.fromCliFlags(List.of("--gpu=1")), Optional.empty(),
                    () -> false);
            // bob was served after alice: she is the least recently served, her request the fair next
            Allocation once = s.allocate(bob, GpuRequests.fromCliFlags(List.of("--gpu=1")), Optional.empty(),
                    () -> false);
            s.release(bob, once.id());
            try (Queued all = Queued.queue(s, alice, "--gpu=8")) {
                try (Now bobs = Now.ask(s, bob, "--gpu=1")) {
                    assertThat(bobs.granted).as(
                            "bob's 1-GPU request, 7 GPUs free, alice holding 1 and waiting for all 8"
                                    + " (queue: %s); refused: %s",
                            s.queueView(),
                            bobs.refusal()).isPresent();
                } finally {
                    all.gone.set(true);
                }
            } finally {
                s.release(alice, held.id());
            }
        }
    }
}
