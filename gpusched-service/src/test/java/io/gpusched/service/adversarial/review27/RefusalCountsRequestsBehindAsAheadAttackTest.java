package io.gpusched.service.adversarial.review27;

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
 * Review27: commit 330c9763 made the queue's refusal name the request a free GPU is kept for "as one of those waiting
 * ahead of it": "... waits for X since T, one of N waiting, ahead of it". FairQueue.owed takes N = size - nows, every
 * waiting request, those BEHIND the refused one in fair order included. Carol holds GPU 0; erin was served a GPU (so
 * she goes behind users never served), then waits for GPU 0; dave (never served) waits for all 8 GPUs. Alice (never
 * served) asks for 1 GPU without a wait: her fair place is second, behind dave and ahead of erin (GET /api/v1/queue
 * lists dave, then erin). She is refused, rightly (GPUs 2 to 7 are kept for dave), but told "one of 2 waiting, ahead
 * of it": one request waits ahead of her. Refusals must be true (issue 33).
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class RefusalCountsRequestsBehindAsAheadAttackTest {

    @Test
    void theCountOfRequestsWaitingAheadLeavesOutThoseBehind(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300)))) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 62751, false);
            Caller carol = ServiceBed.caller("gsu-carol", 62753, false);
            Caller dave = ServiceBed.caller("gsu-dave", 62754, false);
            Caller erin = ServiceBed.caller("gsu-erin", 62755, false);
            Allocation carols = s.allocate(carol, GpuRequests.fromCliFlags(List.of("--devices=0")), Optional.empty(),
                    () -> false);
            Allocation erins = s.allocate(erin, GpuRequests.fromCliFlags(List.of("--devices=1")), Optional.empty(),
                    () -> false);
            try (Queued whole = Queued.queue(s, dave, "--gpu=8"); Queued gpu0 = Queued.queue(s, erin, "--devices=0")) {
                List<Map<String, Object>> queue = s.queueView();
                assertThat(queue).as("dave, then erin (served once), wait").hasSize(2);
                assertThat(queue.get(0).get("user")).isEqualTo("gsu-dave");
                try (Now hers = Now.ask(s, alice, "--gpu=1")) {
                    assertThat(hers.refused).as("alice's 1 GPU: GPUs 2 to 7 kept for dave's 8").isNotNull();
                    String msg = hers.refused.getMessage();
                    Matcher m = Pattern.compile("where (\\S+) \\(uid \\d+\\) waits for .*, one of (\\d+) waiting,"
                            + " ahead of it").matcher(msg);
                    assertThat(m.find()).as("alice's refusal names a waiting request ahead of her: %s", msg).isTrue();
                    assertThat(m.group(1)).isEqualTo("gsu-dave");
                    assertThat(Integer.parseInt(m.group(2))).as("requests waiting ahead of alice (never served:"
                            + " behind dave, never served and earlier, ahead of erin, served once) by her refusal: %s;"
                            + " the queue: %s", msg, queue).isEqualTo(1);
                }
            } finally {
                s.release(erin, erins.id());
                s.release(carol, carols.id());
            }
        }
    }
}
