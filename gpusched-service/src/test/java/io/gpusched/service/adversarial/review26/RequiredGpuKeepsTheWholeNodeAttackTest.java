package io.gpusched.service.adversarial.review26;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
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
 * Review26: FairQueue.usable (and so keptFor, freeFor and the "just like" shape of backfillBehind) asks only
 * GpuRequest.couldUse, which ignores {@code requiredDevices}. A waiting request "1 GPU, which must be GPU 0" can only
 * ever be given GPU 0, exactly like {@code --devices=0}, but keptFor keeps ALL 8 GPUs for it while GPU 0 is busy; a
 * request "2 GPUs including GPU 0" whose GPU 0 its own user holds, or an admin drained, cannot be served until that
 * user (or the admin) acts, yet keeps the whole node (keptFor counts only the GPUs the request could use, not the one
 * it must have). Bob's one-GPU request is refused with 7 GPUs idle. Required devices reach the service through
 * NodeService.allocate (the Java API the console and the kubelet-style callers use; the socket's flags have no such
 * form), so this is the API's view of issue 33's promise: nothing is kept for a request that could not be served even
 * if every other user's allocation ended, and a GPU a request could never be given is not kept for it.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class RequiredGpuKeepsTheWholeNodeAttackTest {

    @Test
    void aRequestThatMustHaveBusyGpu0KeepsOnlyGpu0(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300)))) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 62601, false);
            Caller bob = ServiceBed.caller("gsu-bob", 62602, false);
            Caller carol = ServiceBed.caller("gsu-carol", 62603, false);
            Allocation carols = s.allocate(carol, GpuRequests.fromCliFlags(List.of("--devices=0")), Optional.empty(),
                    () -> false);
            try {
                attack(s, alice, bob, GpuRequest.builder().count(1).requiredDevices(0).build(),
                        "alice waits for 1 GPU that must be GPU 0 (carol's): it can only ever be given GPU 0");
            } finally {
                s.release(carol, carols.id());
            }
        }
    }

    @Test
    void aRequestThatMustHaveItsOwnUsersGpuKeepsNothing(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300)))) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 62611, false);
            Caller bob = ServiceBed.caller("gsu-bob", 62612, false);
            Allocation hers = s.allocate(alice, GpuRequests.fromCliFlags(List.of("--devices=0")), Optional.empty(),
                    () -> false);
            // bob served after alice: she is the least recently served, her request the fair next
            Allocation once = s.allocate(bob, GpuRequests.fromCliFlags(List.of("--gpu=1")), Optional.empty(),
                    () -> false);
            s.release(bob, once.id());
            try {
                attack(s, alice, bob, GpuRequest.builder().count(2).requiredDevices(0).build(),
                        "alice holds GPU 0 and waits for 2 GPUs including GPU 0: only her own release can serve it");
            } finally {
                s.release(alice, hers.id());
            }
        }
    }

    @Test
    void aRequestThatMustHaveADrainedGpuKeepsNothing(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300)))) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 62621, false);
            Caller bob = ServiceBed.caller("gsu-bob", 62622, false);
            assertThat(s.drain(ServiceBed.root(), 0, "maintenance")).isTrue();
            try {
                attack(s, alice, bob, GpuRequest.builder().count(2).requiredDevices(0).build(),
                        "GPU 0 drained by an admin; alice waits for 2 GPUs including GPU 0: only the admin can serve"
                                + " it");
            } finally {
                s.undrain(ServiceBed.root(), 0);
            }
        }
    }

    /** Alice waits for {@code hers}; bob then asks for any one GPU without a wait: GPUs 1 to 7 are idle. */
    private static void attack(NodeService s, Caller alice, Caller bob, GpuRequest hers, String what)
            throws Exception {
        try (Queued waiting = Queued.queue(s, alice, hers)) {
            assertThat(waiting.result).as("%s: it cannot be served now", what).isNotDone();
            try (Now bobs = Now.ask(s, bob, "--gpu=1")) {
                assertThat(bobs.granted).as("bob's 1-GPU request, GPUs 1 to 7 idle; %s (queue: %s); refused: %s",
                        what, s.queueView(), bobs.refusal()).isPresent();
            }
        }
    }
}
