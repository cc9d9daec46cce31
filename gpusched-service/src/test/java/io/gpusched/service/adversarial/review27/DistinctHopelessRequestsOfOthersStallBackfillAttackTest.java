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
 * Review27: review24's OtherUsersSecondRequestsPastTheBatchStallBackfill ("the cap bounds a pass; it must not decide
 * who is ever tried"), with requests that are not "just like" each other. 1d746fe3's fix skips, without counting
 * against BATCH (64 tries a pass), a later request whose shape equals one found short; 64 users whose second requests
 * are hopeless but all DIFFERENT still spend every pass's 64 tries, and the next pass starts again from the same users.
 * Carol holds GPU 0. 64 users each wait for GPU 0, then for GPU 0 plus a subset of GPUs 1 to 6 of their own (the 64
 * subsets: 64 shapes); bob, last in fair order (served most recently), waits for GPU 0, then for any one GPU. GPU 7 is
 * idle and kept for no one, yet bob's second request is never tried.
 */
@Tag("adversarial")
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class DistinctHopelessRequestsOfOthersStallBackfillAttackTest {
    /** FairQueue.BATCH. */
    private static final int BATCH = 64;

    @Test
    void bobsSecondRequestIsTriedBehindSixtyFourUsersDifferentHopelessOnes(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300)))) {
            NodeService s = bed.start();
            Caller bob = ServiceBed.caller("gsu-bob", 62770, false);
            Caller carol = ServiceBed.caller("gsu-carol", 62771, false);
            Allocation carols = s.allocate(carol, GpuRequests.fromCliFlags(List.of("--devices=0")), Optional.empty(),
                    () -> false);
            // bob served last: behind every other user (never served) in fair order
            s.release(bob, s.allocate(bob, GpuRequests.fromCliFlags(List.of("--gpu=1")), Optional.empty(),
                    () -> false).id());
            List<Queued> others = new ArrayList<>();
            try {
                for (int u = 0; u < BATCH; u++) {
                    Caller c = ServiceBed.caller("gsu-v" + u, 62780 + u, false);
                    StringBuilder devices = new StringBuilder("0");
                    for (int g = 1; g <= 6; g++) {
                        if ((u & (1 << (g - 1))) != 0) {
                            devices.append(',').append(g);
                        }
                    }
                    others.add(Queued.queue(s, c, "--devices=0"));
                    others.add(Queued.queue(s, c, "--devices=" + devices));
                }
                try (Queued first = Queued.queue(s, bob, "--devices=0");
                     Queued any = Queued.queue(s, bob, "--gpu=1")) {
                    boolean served = Clients.await(any.result::isDone, 20);
                    int waiting = s.queueView().size();
                    first.gone.set(true);
                    assertThat(served && !any.result.isCompletedExceptionally()).as("bob's second waiting request (any"
                            + " one GPU), GPU 7 idle and kept for no one, %s requests waiting (64 users' for GPU 0 and"
                            + " for GPU 0 with 64 different sets of GPUs 1 to 6, bob's first for GPU 0); result: %s",
                            waiting, any.result).isTrue();
                }
            } finally {
                for (Queued q : others) {
                    q.gone.set(true);
                }
                s.release(carol, carols.id());
            }
        }
    }
}
