package io.gpusched.service.adversarial.review26;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.ServiceSettings;
import io.gpusched.core.UserQuotas;
import io.gpusched.server.Caller;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
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
 * Review26: review24's rule "a refusal blames the queue only when a FREE GPU the request could use is kept and enough
 * are free without keeping", for a shared request. FairQueue.freeFor counts a GPU as free for a shared request when no
 * one holds it exclusively and its memory is left, but not whether a share of it is left
 * ({@code gpu.max_shared_per_gpu}). With {@code max_shared_per_gpu: 1}, carol holds GPU 0's only share (1 GB of 32).
 * Alice asks, without a wait, for a 1 GB share of GPU 0: refused by the scheduler (no share left). Dave then waits for
 * GPU 0 exclusively (kept for him: GPU 0). Alice asks again: the truth is unchanged (no share of GPU 0 is left, whoever
 * waits), but the answer now says "the GPUs free now are owed to the node service's queue, where gsu-dave waits for
 * GPU 0 ... ask with a wait to queue fairly behind it". GPU 0 is not free, nothing free is owed to dave, and queueing
 * behind him gets alice nothing sooner.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class FullShareSlotsRefusalBlamesTheQueueAttackTest {

    @Test
    void aShareOfAGpuWithNoShareLeftIsNotSaidToBeOwedToTheQueue(@TempDir Path tmp) throws Exception {
        GpuConfig config = GpuConfig.builder().users(UserQuotas.none()).maxSharedPerGpu(1).service(ServiceSettings
                .defaults().withAdminGroup("gsu-nonexistent").withKillGrace(Duration.ofMillis(300))).build();
        try (ServiceBed bed = new ServiceBed(tmp, config)) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 62631, false);
            Caller carol = ServiceBed.caller("gsu-carol", 62633, false);
            Caller dave = ServiceBed.caller("gsu-dave", 62634, false);
            Allocation carols = s.allocate(carol, GpuRequests.fromCliFlags(List.of("--devices=0", "--shared=1GB")),
                    Optional.empty(), () -> false);
            try {
                GpuAllocationException alone = refusal(s, alice);
                assertThat(alone).as("alice's 1 GB share of GPU 0, whose only share carol holds, nobody waiting")
                        .isNotNull();
                try (Queued his = Queued.queue(s, dave, "--devices=0")) {
                    GpuAllocationException queued = refusal(s, alice);
                    try {
                        assertThat(queued).as("alice's share of GPU 0 while dave waits for it").isNotNull();
                        assertThat(queued.reason() + " " + queued.getMessage()).as("alice's refusal for a share of"
                                + " GPU 0 (no share left: carol holds its only one) while dave waits for GPU 0; the"
                                + " refusal with nobody waiting: %s %s; queue: %s", alone.reason(), alone.getMessage(),
                                s.queueView()).doesNotContain("owed to the node service's queue")
                                .doesNotContain("gsu-dave");
                    } finally {
                        his.gone.set(true);
                    }
                }
            } finally {
                s.release(carol, carols.id());
            }
        }
    }

    /** @return alice's refusal for a 1 GB share of GPU 0 without a wait (null: served, and released) */
    private static GpuAllocationException refusal(NodeService s, Caller alice) throws InterruptedException {
        try {
            Allocation a = s.allocate(alice, GpuRequests.fromCliFlags(List.of("--devices=0", "--shared=1GB")),
                    Optional.empty(), () -> false);
            s.release(alice, a.id());
            return null;
        } catch (GpuAllocationException e) {
            return e;
        }
    }
}
