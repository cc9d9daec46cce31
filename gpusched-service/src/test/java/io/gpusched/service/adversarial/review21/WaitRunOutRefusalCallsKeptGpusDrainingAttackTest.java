package io.gpusched.service.adversarial.review21;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuRequests;
import io.gpusched.server.Caller;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.adversarial.review10.Clients;
import io.gpusched.service.adversarial.review10.Queued;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review21: refusals must be true and name who may act. The backfilling keeps GPUs for a waiting request by marking
 * them DRAINING in the scheduler's copy of the state (DefaultGpuScheduler.handOff, "withheld"); the refusal a waiting
 * request gets there is kept (Ticket.lastRefusal) and, when its wait runs out, handed to its user as the final answer
 * (FairQueue.sweep). Carol holds GPU 0; alice waits for all 8; bob waits 3 s for one GPU. Bob's final refusal then
 * describes the node as it never was: GPUs "draining" (nothing drains: seven are free, kept for alice's request, and
 * GPU 0 is held by carol), and never names alice's request, the one thing that stood in his way, as the refusal of
 * the same request without a wait does ("owed to the node service's queue, where gsu-alice ... waits for ...").
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class WaitRunOutRefusalCallsKeptGpusDrainingAttackTest {

    @Test
    void aWaitThatRunsOutBehindAKeptRequestIsRefusedNamingItNotADrain(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300)))) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 62121, false);
            Caller bob = ServiceBed.caller("gsu-bob", 62122, false);
            Caller carol = ServiceBed.caller("gsu-carol", 62123, false);
            Allocation carols = s.allocate(carol, GpuRequests.fromCliFlags(List.of("--devices=0")), Optional.empty(),
                    () -> false);
            try (Queued all = Queued.queue(s, alice, "--gpu=8");
                 Queued one = Queued.queue(s, bob, Duration.ofSeconds(3), "--gpu=1")) {
                assertThat(Clients.await(one.result::isDone, 40)).as("bob's 3 s wait ended").isTrue();
                Throwable why = null;
                try {
                    one.result.get();
                } catch (ExecutionException e) {
                    why = e.getCause();
                }
                assertThat(why).as("bob's 1-GPU request behind alice's 8 (carol holds GPU 0)")
                        .isInstanceOf(GpuAllocationException.class);
                String m = why.getMessage();
                assertThat(m.contains("gsu-alice") && !m.contains("draining")).as("bob's final refusal names"
                        + " alice's request, that the free GPUs are owed to, and calls no GPU draining (none is): %s",
                        ((GpuAllocationException) why).reason() + " " + m).isTrue();
                all.gone.set(true);
            } finally {
                s.release(carol, carols.id());
            }
        }
    }
}
