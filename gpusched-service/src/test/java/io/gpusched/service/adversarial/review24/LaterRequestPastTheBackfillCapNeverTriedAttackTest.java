package io.gpusched.service.adversarial.review24;

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
 * Review24: FairQueue.backfillBehind promises "a user whose first request waits for a busy GPU is served another that
 * nobody waits for, as anyone else would be", but takes of each user's later requests only the first
 * eight ({@code q.stream().skip(1).filter(t -> !t.now).limit(PER_USER_BACKFILL)}), the same ones every
 * pass. Carol holds GPU 0. Alice waits for GPU 0 nine times (her first and 8 later requests, all for the busy GPU),
 * then for any one GPU: GPUs 1 to 7 idle, kept for nobody, nobody else waiting; her 10th request is never tried, in
 * any pass, for as long as the 8 ahead of it wait (its wait runs out with 7 GPUs idle the whole time).
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class LaterRequestPastTheBackfillCapNeverTriedAttackTest {
    /** FairQueue.PER_USER_BACKFILL. */
    private static final int PER_USER = 8;

    @Test
    void aRequestForAnyGpuBehindEightPinnedOnesIsServedWhileSevenGpusAreIdle(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300)))) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 62431, false);
            Caller carol = ServiceBed.caller("gsu-carol", 62433, false);
            Allocation carols = s.allocate(carol, GpuRequests.fromCliFlags(List.of("--devices=0")), Optional.empty(),
                    () -> false);
            List<Queued> pinned = new ArrayList<>();
            try {
                for (int i = 0; i < 1 + PER_USER; i++) {
                    pinned.add(Queued.queue(s, alice, "--devices=0"));
                }
                try (Queued any = Queued.queue(s, alice, "--gpu=1")) {
                    boolean served = Clients.await(any.result::isDone, 20);
                    assertThat(served && !any.result.isCompletedExceptionally()).as("alice's 10th waiting request"
                            + " (any one GPU), GPUs 1 to 7 idle and kept for nobody, her 9 earlier ones all for GPU 0"
                            + " (carol's); queue: %s; result: %s", s.queueView(), any.result).isTrue();
                }
            } finally {
                for (Queued q : pinned) {
                    q.gone.set(true);
                }
                s.release(carol, carols.id());
            }
        }
    }
}
