package io.gpusched.service.adversarial.review27;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequests;
import io.gpusched.server.Caller;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.adversarial.review10.Clients;
import io.gpusched.service.adversarial.review10.Queued;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review27: review24's LaterRequestPastTheBackfillCapNeverTried, with requests that are not "just like" each other.
 * The fix (1d746fe3) lets a later waiting request whose shape (usable GPUs, count, sharing, shared memory, required
 * GPUs) equals one the pass found short skip its try without counting against PER_USER_BACKFILL (8); hopeless
 * requests of DIFFERENT shapes still count, and the pass still tries the same first 8 of a user's later requests in
 * every pass. Carol holds GPU 0. Alice waits for GPU 0, then for GPUs {0,1}, {0,2}, ..., {0,6}, {0,1,2}, {0,1,3}
 * (8 requests, all hopeless while carol holds GPU 0, all different), then for GPU 7: idle, kept for nobody, nobody
 * else waiting. Her last request is never tried, in any pass, for as long as carol holds GPU 0. The FairQueue doc:
 * "a user whose first request waits for a busy GPU is served another that nobody waits for".
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class DistinctHopelessRequestsFillTheUsersBackfillCapAttackTest {

    @Test
    void aLaterRequestForAnIdleGpuIsTriedBehindEightDifferentHopelessOnes(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300)))) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 62761, false);
            Caller carol = ServiceBed.caller("gsu-carol", 62763, false);
            Allocation carols = s.allocate(carol, GpuRequests.fromCliFlags(List.of("--devices=0")), Optional.empty(),
                    () -> false);
            List<Queued> hopeless = new ArrayList<>();
            try {
                hopeless.add(Queued.queue(s, alice, "--devices=0"));
                for (String d : List.of("0,1", "0,2", "0,3", "0,4", "0,5", "0,6", "0,1,2", "0,1,3")) {
                    hopeless.add(Queued.queue(s, alice, "--devices=" + d));
                }
                try (Queued gpu7 = Queued.queue(s, alice, "--devices=7")) {
                    boolean served = Clients.await(gpu7.result::isDone, 20);
                    assertThat(served && !gpu7.result.isCompletedExceptionally()).as("alice's 10th request (GPU 7,"
                            + " idle, kept for no one, nobody else waiting) behind her 9 for sets with carol's GPU 0;"
                            + " queue: %s; result: %s", s.queueView().size(), gpu7.result).isTrue();
                }
            } finally {
                for (Queued q : hopeless) {
                    q.gone.set(true);
                }
                s.release(carol, carols.id());
            }
        }
    }
}
