package io.gpusched.accounting.adversarial.durability;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.gpusched.accounting.AccountingSampler;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.HostIdleEffects;
import io.gpusched.accounting.ReleaseRecordChild;
import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationEvent;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.host.GpuNode;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Many threads feed the node's sampler releases at once (each an allocation's grant and release event, as the
 * scheduler fires them), while another thread sweeps and checkpoints: every release whose {@code onEvent} returned has
 * its record in the store exactly once, read back with this package's own parser, and each allocation's intervals
 * tile grant to release with nothing counted twice and no hole.
 *
 * <p>The events are fed directly, not through a scheduler's listeners: a durable scheduler fires the events of a
 * ledger batch in the thread that led it, so one allocation's release can reach listeners before its grant (see
 * docs/PERFORMANCE.md, issue 33's round 3), which is not this test's subject.
 */
@Tag("adversarial")
class ConcurrentReleaseRecordsTest {
    private static final int THREADS = 16;
    private static final int EACH = 50;
    private static final long HELD = 3;

    @TempDir
    Path dir;

    @Test
    @Timeout(120)
    void everyAcknowledgedReleaseIsInTheStoreExactlyOnce() throws Exception {
        Map<String, long[]> acked = new ConcurrentHashMap<>(); // id -> {granted, released}
        AtomicReference<Throwable> failed = new AtomicReference<>();
        try (GpuNode node = GpuNode.builder().inventory("simulated:dgx1-v100").stateDir(dir).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).build()) {
            AccountingSampler s = AccountingSampler.open(AccountingStore.at(dir), AccountingSettings.defaults()
                    .withCheckpoint(Duration.ofSeconds(1)), node.inventory(), null,
                    new HostIdleEffects(node
                            .scheduler()),
                    Clock.systemUTC()).orElseThrow();
            Allocation held = node.scheduler().allocate(GpuRequests.fromCliFlags("--gpu=1", "--owner=bob"));
            AtomicBoolean sweeping = new AtomicBoolean(true);
            Thread sweeper = new Thread(() -> {
                while (sweeping.get()) {
                    try {
                        s.sweep(node.inventory().sample(), node.scheduler().allocations());
                        Thread.sleep(2);
                    } catch (Throwable t) {
                        failed.compareAndSet(null, t);
                        return;
                    }
                }
            });
            sweeper.start();
            List<GpuDevice> devices = node.inventory().devices();
            CountDownLatch start = new CountDownLatch(1);
            List<Thread> threads = new ArrayList<>();
            for (int t = 0; t < THREADS; t++) {
                String uuid = devices.get(t % devices.size()).uuid();
                String prefix = "c" + t + "-";
                Thread th = new Thread(() -> {
                    try {
                        start.await();
                        for (int j = 0; j < EACH; j++) {
                            String id = prefix + j;
                            Instant from = Instant.now();
                            s.onEvent(ReleaseRecordChild.event(AllocationEvent.Type.ALLOCATED, from, id, uuid));
                            s.onEvent(ReleaseRecordChild.event(AllocationEvent.Type.RELEASED, from.plusMillis(HELD),
                                    id, uuid));
                            acked.put(id, new long[]{from.toEpochMilli(), from.toEpochMilli() + HELD});
                        }
                    } catch (Throwable e) {
                        failed.compareAndSet(null, e);
                    }
                });
                th.start();
                threads.add(th);
            }
            start.countDown();
            for (Thread th : threads) {
                th.join();
            }
            sweeping.set(false);
            sweeper.join();
            node.scheduler().release(held.id());
            s.close();
        }
        assertThat(failed.get()).as("a releasing or sweeping thread failed").isNull();
        assertThat(acked).hasSize(THREADS * EACH);

        Map<String, List<JsonNode>> byId = new ConcurrentHashMap<>();
        for (JsonNode n : JournalLines.all(dir.resolve(AccountingStore.DIR))) {
            if (JournalLines.interval(n)) {
                byId.computeIfAbsent(n.get("id").asText(), k -> new ArrayList<>()).add(n);
            }
        }
        List<String> problems = new ArrayList<>();
        acked.forEach((id, times) -> {
            List<JsonNode> ivs = new ArrayList<>(byId.getOrDefault(id, List.of()));
            ivs.sort(Comparator.comparingLong(x -> x.get("from").asLong()));
            long ended = ivs.stream().filter(x -> x.hasNonNull("end")).count();
            if (ended != 1) {
                problems.add(id + ": " + ended + " records that end it (want exactly 1): " + ivs);
                return;
            }
            JsonNode last = ivs.get(ivs.size() - 1);
            if (!"RELEASED".equals(last.get("end").asText())) {
                problems.add(id + ": its last interval ends " + last.get("end") + ", not RELEASED");
            }
            if (ivs.get(0).get("from").asLong() != times[0]) {
                problems.add(id + ": first interval from " + ivs.get(0).get("from") + ", granted at " + times[0]);
            }
            long held = 0;
            for (int i = 0; i < ivs.size(); i++) {
                JsonNode iv = ivs.get(i);
                if (i > 0 && iv.get("from").asLong() != ivs.get(i - 1).get("to").asLong()) {
                    problems.add(id + ": interval " + i + " starts at " + iv.get("from") + ", the one before ended at "
                            + ivs.get(i - 1).get("to") + " (a hole or an overlap)");
                }
                for (JsonNode g : iv.get("gpus")) {
                    held += g.get("held").asLong();
                }
            }
            long span = last.get("to").asLong() - times[0];
            if (held != span || last.get("to").asLong() != times[1]) {
                problems.add(id + ": held " + held + " ms over intervals spanning " + span + " ms, released at "
                        + times[1]);
            }
        });
        assertThat(problems.subList(0, Math.min(10, problems.size())))
                .as("acknowledged releases against the store (first 10 of %d)", problems.size()).isEmpty();
    }
}
