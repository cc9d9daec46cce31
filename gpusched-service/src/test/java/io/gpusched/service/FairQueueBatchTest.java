package io.gpusched.service;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.UserQuotas;
import io.gpusched.server.Caller;
import io.gpusched.testing.LedgerReader;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The fair queue grants the requests that fit in one transaction (one forced write, counted by the ledger's
 * statistics), in the order granting one at a time would follow: round-robin between users, least recently served
 * first, first come first served within a user. The order is read back from the ledger's file by the independent
 * {@link LedgerReader} and compared with an order worked out by hand from the documented rule.
 */
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class FairQueueBatchTest {

    @Test
    void requestsThatFitAreGrantedInFairOrderInOneForcedWrite(@TempDir Path tmp) throws Exception {
        Caller alice = ServiceBed.caller("gsu-alice", 62001, false);
        Caller bob = ServiceBed.caller("gsu-bob", 62002, false);
        Caller dave = ServiceBed.caller("gsu-dave", 62003, false);
        Caller carol = ServiceBed.caller("gsu-carol", 62004, true);
        try (ServiceBed bed = new ServiceBed(tmp, GpuConfig.builder().users(UserQuotas.none()).build())) {
            NodeService s = bed.start();
            List<String> held = new ArrayList<>();
            for (int i = 0; i < 8; i++) { // carol fills the node (8 GPUs), served through the queue
                held.add(s.allocate(carol, GpuRequests.fromCliFlags("--gpu=1"), Optional.empty(), () -> false).id());
            }
            // they queue in this order (each waits until the one before is in the queue)
            Object[][] arrivals = {{alice, "a0"}, {alice, "a1"}, {bob, "b0"}, {alice, "a2"}, {bob, "b1"},
                {dave, "d0"}};
            ExecutorService ex = Executors.newCachedThreadPool();
            try {
                Map<String, Future<Allocation>> waiting = new LinkedHashMap<>();
                for (Object[] a : arrivals) {
                    Caller c = (Caller) a[0];
                    String n = (String) a[1];
                    waiting.put(n, ex.submit(() -> s.allocate(c, GpuRequests.fromCliFlags("--gpu=1", "--label=n=" + n),
                            Optional.of(Duration.ofMinutes(1)), () -> false)));
                    NodeServiceTest.waitForQueue(s, waiting.size());
                }
                long forces = bed.scheduler.ledgerStatistics().orElseThrow().forces();
                // six GPUs come free at once (one transaction, one wake of the dispatcher)
                assertThat(bed.scheduler.releaseAll(held.subList(0, 6))).isEqualTo(6);
                Map<String, String> idToLabel = new LinkedHashMap<>();
                for (Map.Entry<String, Future<Allocation>> e : waiting.entrySet()) {
                    Allocation a = e.getValue().get(1, TimeUnit.MINUTES);
                    assertThat(a.request().labels().get("n")).as("each waiter gets its own request's grant")
                            .isEqualTo(e.getKey());
                    idToLabel.put(a.id(), e.getKey());
                }
                long written = bed.scheduler.ledgerStatistics().orElseThrow().forces() - forces;
                assertThat(written).as("the release, then one forced write for the six grants (not one each)")
                        .isLessThanOrEqualTo(2);
                // worked out by hand: alice, bob, dave never served (ties to the oldest request: a0, b0, d0), then
                // alice (served first of them), then bob, then alice's last
                List<String> granted = new ArrayList<>();
                for (String id : LedgerReader.read(bed.state).live.keySet()) {
                    if (idToLabel.containsKey(id)) {
                        granted.add(idToLabel.get(id));
                    }
                }
                assertThat(granted).containsExactly("a0", "b0", "d0", "a1", "b1", "a2");
                assertThat(s.queue().size()).isZero();
            } finally {
                ex.shutdownNow();
            }
        }
    }
    /**
     * A release while requests wait is made by the queue in one transaction with the grant it allows (one forced
     * write, not two), and is answered only once both are in the ledger's file.
     */
    @Test
    void aReleaseWhileRequestsWaitIsOneForcedWriteWithTheGrantItAllows(@TempDir Path tmp) throws Exception {
        Caller alice = ServiceBed.caller("gsu-alice", 62001, false);
        Caller bob = ServiceBed.caller("gsu-bob", 62002, false);
        Caller carol = ServiceBed.caller("gsu-carol", 62004, false);
        try (ServiceBed bed = new ServiceBed(tmp, GpuConfig.builder().users(UserQuotas.none()).build())) {
            NodeService s = bed.start();
            List<String> held = new ArrayList<>();
            for (int i = 0; i < 8; i++) {
                held.add(s.allocate(carol, GpuRequests.fromCliFlags("--gpu=1"), Optional.empty(), () -> false).id());
            }
            ExecutorService ex = Executors.newCachedThreadPool();
            try {
                List<Future<Allocation>> waiting = new ArrayList<>();
                Object[][] arrivals = {{alice, "a0"}, {alice, "a1"}, {bob, "b0"}, {alice, "a2"}};
                for (Object[] a : arrivals) {
                    Caller c = (Caller) a[0];
                    String n = (String) a[1];
                    waiting.add(ex.submit(() -> s.allocate(c, GpuRequests.fromCliFlags("--gpu=1", "--label=n=" + n),
                            Optional.of(Duration.ofMinutes(1)), () -> false)));
                    NodeServiceTest.waitForQueue(s, waiting.size());
                }
                // fair order: a0, then b0 (bob never served), then a1, a2
                String[] expected = {"a0", "b0", "a1", "a2"};
                int[] served = {0, 2, 1, 3};
                for (int i = 0; i < 4; i++) {
                    long forces = bed.scheduler.ledgerStatistics().orElseThrow().forces();
                    assertThat(s.release(carol, held.get(i))).isTrue();
                    // answered: the release and the grant it allowed are in the file
                    LedgerReader file = LedgerReader.read(bed.state);
                    assertThat(file.ended).extracting(LedgerReader.Ended::id).contains(held.get(i));
                    Allocation a = waiting.get(served[i]).get(1, TimeUnit.MINUTES);
                    assertThat(a.request().labels().get("n")).isEqualTo(expected[i]);
                    assertThat(file.live).as("the grant %s was written with the release", expected[i])
                            .containsKey(a.id());
                    assertThat(bed.scheduler.ledgerStatistics().orElseThrow().forces() - forces)
                            .as("the release and the grant it allowed: one forced write").isEqualTo(1);
                    assertThat(s.queue().size()).isEqualTo(3 - i);
                }
                assertThat(LedgerReader.read(bed.state).doubleGrants).isEmpty();
                // nobody waits: a release is made at once, by itself
                assertThat(s.release(carol, held.get(4))).isTrue();
                assertThat(LedgerReader.read(bed.state).ended).extracting(LedgerReader.Ended::id)
                        .contains(held.get(4));
            } finally {
                ex.shutdownNow();
            }
        }
    }
}
