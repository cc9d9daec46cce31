package io.gpusched.service.adversarial.review32;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuAllocationException.Reason;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.ServiceSettings;
import io.gpusched.core.UserQuotas;
import io.gpusched.server.Caller;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.adversarial.review10.Clients;
import io.gpusched.service.adversarial.review10.Queued;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review32: review31's fix (e54e0c47) records QUOTA_EXCEEDED for a later waiting request skipped for its owner's quota
 * only when enough GPUs are free: FairQueue.backfillBehind checks "too few GPUs free" first and skips the request
 * without a word. On a full node, alice at her quota (2 of 2) queues a later request; when its wait runs out it is
 * refused INSUFFICIENT_GPUS ("gave up after waiting"), not QUOTA_EXCEEDED as SERVICE.md promises ("a waiting request
 * over its owner's quota that runs out of time is refused QUOTA_EXCEEDED, naming the limit"): alice is told to wait
 * for GPUs, though no release by anyone else would ever serve it; only her own would.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class OverQuotaLaterRequestOnAFullNodeGivenUpAsShortOfGpusAttackTest {

    @Test
    void anOverQuotaLaterRequestOnAFullNodeIsRefusedForTheQuota(@TempDir Path tmp) throws Exception {
        GpuConfig config = GpuConfig.builder().users(new UserQuotas(2, Map.of(), Map.of())).service(ServiceSettings
                .defaults().withAdminGroup("gsu-nonexistent").withKillGrace(Duration.ofMillis(300))).build();
        try (ServiceBed bed = new ServiceBed(tmp, config)) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 63231, false);
            List<Caller> others = List.of(ServiceBed.caller("gsu-carol", 63233, false), ServiceBed.caller("gsu-dave",
                    63234, false), ServiceBed.caller("gsu-erin", 63235, false));
            List<Allocation> theirs = new ArrayList<>();
            for (Caller o : others) {
                theirs.add(s.allocate(o, GpuRequests.fromCliFlags(List.of("--gpu=2")), Optional.empty(), () -> false));
            }
            Allocation held = s.allocate(alice, GpuRequests.fromCliFlags(List.of("--gpu=2")), Optional.empty(),
                    () -> false);
            try (Queued head = Queued.queue(s, alice, "--gpu=1");
                 Queued later = Queued.queue(s, alice, Duration.ofSeconds(3), "--gpu=1")) {
                assertThat(Clients.await(later.result::isDone, 40)).as("the later request's 3 s wait ran out; queue %s",
                        s.queueView()).isTrue();
                Throwable why = null;
                try {
                    later.result.join();
                } catch (CompletionException e) {
                    why = e.getCause();
                }
                assertThat(why).as("given up, not served").isInstanceOf(GpuAllocationException.class);
                GpuAllocationException g = (GpuAllocationException) why;
                assertThat(g.reason()).as("alice holds 2 of her quota of 2 (the node is full); her later 1-GPU"
                        + " request's refusal when its wait ran out: %s (the head's: %s)", g.getMessage(), head.result)
                        .isEqualTo(Reason.QUOTA_EXCEEDED);
            } finally {
                s.release(alice, held.id());
                for (int i = 0; i < others.size(); i++) {
                    s.release(others.get(i), theirs.get(i).id());
                }
            }
        }
    }
}
