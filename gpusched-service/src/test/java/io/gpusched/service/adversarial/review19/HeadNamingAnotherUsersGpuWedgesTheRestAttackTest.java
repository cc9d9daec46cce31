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
 * Review19: review18's wedge, moved one GPU over. Carol keeps GPU 0 (a long job, a week's lease). Alice asks, with a
 * wait of years, for GPUs 0 and 1 by name ({@code --devices=0,1}). Her request can only ever use GPUs 0 and 1, yet
 * FairQueue.holdsBack answers for the whole node: GPU 1 is free and could serve it (rule 1) and alice holds neither
 * (rule 2), so as the fair head (bob was served once after alice) it holds back all seven free GPUs. Bob's 1-GPU
 * request is refused INSUFFICIENT_GPUS "owed to the node service's queue" while GPUs 2 to 7, which alice's request
 * can never use, stay idle for as long as carol keeps GPU 0. Review18's finding was that free GPUs a waiting request
 * does not name are not owed to it; the fix (rule 2) caught only the case where its own user holds the GPU it names.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class HeadNamingAnotherUsersGpuWedgesTheRestAttackTest {

    @Test
    void aWaitingRequestNamingGpus0And1DoesNotKeepGpus2To7FromBob(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300)))) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 61922, false);
            Caller bob = ServiceBed.caller("gsu-bob", 61923, false);
            Caller carol = ServiceBed.caller("gsu-carol", 61924, false);
            Allocation carols = s.allocate(carol, GpuRequests.fromCliFlags(List.of("--devices=0")), Optional.empty(),
                    () -> false);
            Allocation once = s.allocate(bob, GpuRequests.fromCliFlags(List.of("--gpu=1")), Optional.empty(),
                    () -> false);
            s.release(bob, once.id());

            try (Queued hers = Queued.queue(s, alice, "--devices=0,1");
                 Now bobs = Now.ask(s, bob, "--gpu=1")) {
                assertThat(bobs.granted).as("bob's 1-GPU request, GPUs 1 to 7 free, carol holding GPU 0 and alice"
                        + " waiting for GPUs 0 and 1 by name (queue: %s); refused: %s", s.queueView(), bobs.refusal())
                        .isPresent();
            } finally {
                s.release(carol, carols.id());
            }
        }
    }
}
