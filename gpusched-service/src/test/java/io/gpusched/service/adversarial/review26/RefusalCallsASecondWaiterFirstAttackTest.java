package io.gpusched.service.adversarial.review26;

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
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review26: FairQueue.owed says of the request it names "X waits for ... since ..., first of N waiting". The request it
 * names is Kept.keeperOf's: the first (in fair order) that a FREE GPU the refused request could use is kept for, not
 * the queue's first. Carol holds GPU 0. Dave waits for GPU 0 (first in the queue: kept for him, GPU 0, busy), erin
 * then for all 8 GPUs (second: kept for her, all 8). Alice asks for one GPU without a wait and is refused (rightly:
 * GPUs 1 to 7 are kept for erin), told "gsu-erin ... waits for 8 GPUs since ..., first of 2 waiting", while
 * GET /api/v1/queue lists erin second, behind dave. Refusals must be true (issue 33).
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class RefusalCallsASecondWaiterFirstAttackTest {

    @Test
    void theRequestARefusalCallsFirstOfTheWaitingIsTheQueuesFirst(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300)))) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 62641, false);
            Caller carol = ServiceBed.caller("gsu-carol", 62643, false);
            Caller dave = ServiceBed.caller("gsu-dave", 62644, false);
            Caller erin = ServiceBed.caller("gsu-erin", 62645, false);
            Allocation carols = s.allocate(carol, GpuRequests.fromCliFlags(List.of("--devices=0")), Optional.empty(),
                    () -> false);
            try (Queued his = Queued.queue(s, dave, "--devices=0"); Queued hers = Queued.queue(s, erin, "--gpu=8")) {
                List<Map<String, Object>> queue = s.queueView();
                assertThat(queue).as("dave, then erin, wait").hasSize(2);
                GpuAllocationException refused = null;
                Optional<Allocation> got = Optional.empty();
                try {
                    got = Optional.of(s.allocate(alice, GpuRequests.fromCliFlags(List.of("--gpu=1")),
                            Optional.empty(), () -> false));
                } catch (GpuAllocationException e) {
                    refused = e;
                }
                try {
                    assertThat(refused).as("alice's 1 GPU, GPUs 1 to 7 kept for erin's 8").isNotNull();
                    String msg = refused.getMessage();
                    // it names the request the free GPUs are kept for (erin's), and says it is one of those waiting
                    // ahead, not the queue's first (dave's is: the lead's fix of the wording)
                    Matcher m = Pattern.compile("where (\\S+) \\(uid \\d+\\) waits for .*, (first|one) of (\\d+)"
                            + " waiting").matcher(msg);
                    assertThat(m.find()).as("alice's refusal names a waiting request: %s", msg).isTrue();
                    assertThat(m.group(2).equals("first") ? m.group(1) : queue.get(0).get("user")).as("the user"
                            + " alice's refusal calls first of %s waiting: %s; the queue: %s", m.group(3), msg, queue)
                            .isEqualTo(queue.get(0).get("user"));
                } finally {
                    if (got.isPresent()) {
                        s.release(alice, got.get().id());
                    }
                    his.gone.set(true);
                    hers.gone.set(true);
                }
            } finally {
                s.release(carol, carols.id());
            }
        }
    }
}
