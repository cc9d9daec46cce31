package io.gpusched.core.adversarial.scheduler;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationEvent;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuAllocationException.Reason;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.SimulatedGpuInventory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * {@link GpuScheduler#releaseAndAllocate} and {@link GpuScheduler#releaseAll}, attacked from their Javadoc and the
 * README ("a refusal (the request's, or an id the node never issued) releases nothing; ids released before are
 * skipped"; {@code release(id)} works for any process's id). Every refusal reason the request can meet is tried with
 * live allocations in the release list: the ledger file must be byte for byte as it was, the allocations live, and no
 * listener may hear a release. The ids are attacked with the node's issued-id rule (a release record's sequence, a
 * leading zero, a number not reached, another prefix). Under concurrency (two schedulers on one ledger, four threads
 * each, swapping their own allocation for a new one), the ledger file is walked by this test's own reader: no GPU is
 * ever granted while a live record holds it, and every returned grant's releases precede it in the file.
 */
@Tag("adversarial")
class CombinedReleaseAttackTest {

    @TempDir
    Path state;

    private GpuScheduler scheduler(SimulatedGpuInventory inv, String yaml, List<AllocationEvent> events) {
        GpuScheduler.Builder b = GpuScheduler.builder().inventory(inv).stateDir(state).auditLogging(false)
                .maintenanceInterval(Duration.ZERO);
        if (yaml != null) {
            b.config(GpuConfig.parse(yaml, "attack.yaml"));
        }
        if (events != null) {
            b.listener(events::add);
        }
        return b.build();
    }

    private static GpuRequest pinned(String job, Integer... gpus) {
        return GpuRequest.builder().deviceIndices(Arrays.asList(gpus)).owner("setup").jobId(job).build();
    }

    private byte[] ledger() throws Exception {
        return Files.readAllBytes(state.resolve("ledger"));
    }

    /** The ways a request can be refused while the release list holds live allocations. */
    enum Refusal {
        DISABLED("gpu: {enabled: false}", Reason.DISABLED, s -> GpuRequest.builder().count(1).owner("x").build()),
        RATE_LIMITED("gpu: {rate_limit: {per_owner_per_second: 0.0001, burst: 1}}", Reason.RATE_LIMITED,
                s -> GpuRequest.builder().count(1).owner("x").build()),
        TOO_MANY_PER_REQUEST("gpu: {max_gpus_per_request: 2}", Reason.INVALID_REQUEST,
                s -> GpuRequest.builder().count(3).owner("x").build()),
        NODE_TOO_SMALL(null, Reason.NODE_TOO_SMALL, s -> GpuRequest.builder().count(9).owner("x").build()),
        UNKNOWN_DEVICE(null, Reason.UNKNOWN_DEVICE, s -> GpuRequest.builder().deviceIndices(List.of(0, 42))
                .owner("x").build()),
        UNHEALTHY(null, Reason.DEVICE_UNHEALTHY, s -> GpuRequest.builder().deviceIndices(List.of(0, 7))
                .owner("x").build()),
        BUSY(null, Reason.DEVICE_BUSY, s -> GpuRequest.builder().deviceIndices(List.of(0, 6)).owner("x").build());

        final String yaml;
        final Reason reason;
        final Function<GpuScheduler, GpuRequest> request;

        Refusal(String yaml, Reason reason, Function<GpuScheduler, GpuRequest> request) {
            this.yaml = yaml;
            this.reason = reason;
            this.request = request;
        }
    }

    @ParameterizedTest
    @EnumSource(Refusal.class)
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void everyRefusalOfTheRequestReleasesNothingAndNoListenerHearsARelease(Refusal how) throws Exception {
        try (SimulatedGpuInventory setupInv = GpuInventories.simulated("dgx1-v100");
             SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100");
             GpuScheduler setup = scheduler(setupInv, null, null)) {
            // another scheduler of the node (as another process) issues the allocations to release
            Allocation a = setup.allocate(pinned("a", 0, 1));
            Allocation b = setup.allocate(pinned("b", 2));
            Allocation busy = setup.allocate(pinned("busy", 6));
            if (how == Refusal.UNHEALTHY) {
                inv.setHealth(7, GpuHealth.unhealthy("XID 79 (attack)"));
            }
            List<AllocationEvent> events = new CopyOnWriteArrayList<>();
            try (GpuScheduler s = scheduler(inv, how.yaml, events)) {
                if (how == Refusal.RATE_LIMITED) {
                    // spend owner x's one token on a grant of its own
                    Allocation spent = s.allocate(GpuRequest.builder().count(1).owner("x").build());
                    s.release(spent.id());
                }
                byte[] before = ledger();
                List<String> liveBefore = s.allocations().stream().map(Allocation::id).toList();
                events.clear();
                GpuRequest req = how.request.apply(s);
                assertThatThrownBy(() -> s.releaseAndAllocate(List.of(a.id(), b.id()), req))
                        .as(how.name()).isInstanceOf(GpuAllocationException.class)
                        .satisfies(e -> assertEquals(how.reason, ((GpuAllocationException) e).reason(),
                                e.getMessage()));
                assertArrayEquals(before, ledger(), how + ": the ledger file changed");
                assertThat(s.allocations()).extracting(Allocation::id).as(how.name())
                        .containsExactlyElementsOf(liveBefore).contains(a.id(), b.id(), busy.id());
                assertThat(events).as(how + ": events after the refusal").noneMatch(
                        e -> e.type() == AllocationEvent.Type.RELEASED || e.type() == AllocationEvent.Type.ALLOCATED);
                setup.refresh();
                assertThat(setup.allocation(a.id())).as("the issuing process still sees a live").isPresent();
                // and releaseAll of the same ids, by the refusing scheduler, is not blocked by its settings' refusal
                // of requests: it releases both in one append
                assertEquals(2, s.releaseAll(List.of(a.id(), b.id())), how.name());
                setup.refresh();
                assertThat(setup.allocation(a.id())).isEmpty();
                assertThat(setup.allocation(b.id())).isEmpty();
            }
        }
    }

    /**
     * The README's node queue: "While any live ticket exists, only the waiter holding the oldest one may allocate:
     * every other allocation on the node ... is refused with INSUFFICIENT_GPUS". A waiter (another scheduler on the
     * ledger) waits for the whole node; {@code releaseAndAllocate} of GPUs that are free once its releases are done
     * is refused, and the refusal must release nothing (the waiter is not served by a half-done call); then
     * {@code releaseAll} of the same ids serves the waiter.
     */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aWaiterAheadRefusesTheCombinedCallWhichReleasesNothing() throws Exception {
        try (SimulatedGpuInventory i1 = GpuInventories.simulated("dgx1-v100");
             SimulatedGpuInventory i2 = GpuInventories.simulated("dgx1-v100");
             GpuScheduler s = scheduler(i1, null, null);
             GpuScheduler waiterSide = scheduler(i2, null, null)) {
            List<String> ids = new ArrayList<>();
            for (int i = 0; i < 8; i++) {
                ids.add(s.allocate(pinned("j" + i, i)).id());
            }
            ExecutorService pool = Executors.newSingleThreadExecutor();
            Future<Allocation> waiter = pool.submit(() -> waiterSide.allocate(GpuRequest.builder().count(8)
                    .owner("waiter").build(), Duration.ofSeconds(40)));
            Path tickets = state.resolve("waiters");
            // the waiter's ticket appears; a waiter that never queues is caught by the test's @Timeout
            while (!hasEntry(tickets)) {
                Thread.sleep(5);
            }
            byte[] before = ledger();
            assertThatThrownBy(() -> s.releaseAndAllocate(List.of(ids.get(0), ids.get(1)), GpuRequest.builder()
                    .count(2).owner("late").build())).isInstanceOf(GpuAllocationException.class)
                    .satisfies(e -> assertEquals(Reason.INSUFFICIENT_GPUS, ((GpuAllocationException) e).reason(),
                            e.getMessage()));
            assertArrayEquals(before, ledger(), "refused behind the waiter: the ledger file changed");
            assertThat(s.allocation(ids.get(0))).isPresent();
            assertThat(waiter.isDone()).as("the waiter is not served by a refused call").isFalse();
            assertEquals(8, s.releaseAll(ids));
            Allocation served = waiter.get(30, TimeUnit.SECONDS);
            assertThat(served.deviceIndices()).hasSize(8);
            pool.shutdown();
            assertNoGpuGrantedTwice(state);
        }
    }

    @Test
    void anIdAnotherProcessIssuedIsReleasedInTheSameAppendAndThatProcessSeesIt() throws Exception {
        try (SimulatedGpuInventory i1 = GpuInventories.simulated("dgx1-v100");
             SimulatedGpuInventory i2 = GpuInventories.simulated("dgx1-v100");
             GpuScheduler other = scheduler(i1, null, null);
             GpuScheduler s = scheduler(i2, null, null)) {
            Allocation theirs = other.allocate(pinned("theirs", 0, 1, 2, 3, 4, 5, 6, 7));
            // s has never caught up with "theirs": the node is full only in the ledger
            Allocation mine = s.releaseAndAllocate(List.of(theirs.id()), GpuRequest.builder().count(8).owner("me")
                    .build());
            assertThat(mine.deviceIndices()).hasSize(8);
            other.refresh();
            assertThat(other.allocation(theirs.id())).isEmpty();
            assertThat(other.allocation(mine.id())).isPresent();
            assertThat(other.release(theirs.id())).as("released once, by the other process").isFalse();
            assertNoGpuGrantedTwice(state);
        }
    }

    @Test
    void idsTheNodeNeverIssuedAsAllocationsAreRefusedAndNothingIsReleased() throws Exception {
        try (SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100");
             GpuScheduler s = scheduler(inv, null, null)) {
            Allocation first = s.allocate(pinned("first", 0));
            s.release(first.id()); // the next sequence is a release record
            Allocation a = s.allocate(pinned("a", 1));
            Allocation b = s.allocate(pinned("b", 2));
            String id = a.id();
            int dash = id.lastIndexOf('-');
            String prefix = id.substring(0, dash);
            long seq = Long.parseLong(id.substring(dash + 1));
            long firstSeq = Long.parseLong(first.id().substring(first.id().lastIndexOf('-') + 1));
            List<String> bad = List.of(
                    prefix + "-" + (firstSeq + 1), // the sequence of first's release record
                    prefix + "-0" + seq, // a's number with a leading zero
                    prefix + "-" + (seq + 1000), // a number not reached
                    "Z" + prefix + "-" + seq, // another prefix
                    prefix + "-" + seq + " ", // a's id with a trailing blank
                    "", // empty
                    prefix + "--" + seq);
            for (String x : bad) {
                byte[] before = ledger();
                assertThatThrownBy(() -> s.releaseAndAllocate(List.of(b.id(), x), pinned("c", 3)))
                        .as("releaseAndAllocate with \"%s\"", x).isInstanceOf(GpuAllocationException.class)
                        .satisfies(e -> assertEquals(Reason.UNKNOWN_ALLOCATION,
                                ((GpuAllocationException) e).reason(), x));
                assertThatThrownBy(() -> s.releaseAll(List.of(b.id(), x)))
                        .as("releaseAll with \"%s\"", x).isInstanceOf(GpuAllocationException.class)
                        .satisfies(e -> assertEquals(Reason.UNKNOWN_ALLOCATION,
                                ((GpuAllocationException) e).reason(), x));
                assertArrayEquals(before, ledger(), "\"" + x + "\": the ledger file changed");
                assertThat(s.allocations()).extracting(Allocation::id).containsExactly(a.id(), b.id());
            }
            // the released allocation's own id is skipped, not refused
            assertEquals(1, s.releaseAll(List.of(first.id(), b.id())));
        }
    }

    @Test
    void releaseAllCountsADuplicateOnceAndWritesOneRecordForIt() throws Exception {
        try (SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100");
             GpuScheduler s = scheduler(inv, null, null)) {
            Allocation a = s.allocate(pinned("a", 0));
            Allocation b = s.allocate(pinned("b", 1));
            long records = s.ledgerStatistics().orElseThrow().records();
            long forces = s.ledgerStatistics().orElseThrow().forces();
            assertEquals(2, s.releaseAll(List.of(a.id(), b.id(), a.id(), b.id())));
            assertEquals(records + 2, s.ledgerStatistics().orElseThrow().records(), "one release record per id");
            assertEquals(forces + 1, s.ledgerStatistics().orElseThrow().forces());
            assertThat(releaseRecordsOf(state, a.id())).isEqualTo(1);
        }
    }

    @Test
    void nullsAreNamedAndReleaseNothing() throws Exception {
        try (SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100");
             GpuScheduler s = scheduler(inv, null, null)) {
            Allocation a = s.allocate(pinned("a", 0));
            byte[] before = ledger();
            assertThatThrownBy(() -> s.releaseAll(null)).isInstanceOf(NullPointerException.class)
                    .hasMessageContaining("allocationIds");
            assertThatThrownBy(() -> s.releaseAll(Arrays.asList(a.id(), null)))
                    .isInstanceOf(NullPointerException.class).hasMessageContaining("allocationIds");
            assertArrayEquals(before, ledger());
            assertThat(s.allocation(a.id())).isPresent();
        }
    }

    /**
     * Two schedulers on one ledger, four threads each; every thread holds one allocation and swaps it, many times, for
     * a new one of 1-3 GPUs with {@code releaseAndAllocate}. Refusals are allowed (the node is busy); a grant must
     * never take a GPU a live record holds, and its releases must be in the file before it.
     */
    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void concurrentSwapsOnOneLedgerNeverGrantAGpuTwice() throws Exception {
        try (SimulatedGpuInventory i1 = GpuInventories.simulated("dgx1-v100");
             SimulatedGpuInventory i2 = GpuInventories.simulated("dgx1-v100");
             GpuScheduler s1 = scheduler(i1, null, null);
             GpuScheduler s2 = scheduler(i2, null, null)) {
            ExecutorService pool = Executors.newFixedThreadPool(8);
            List<Future<List<String[]>>> fs = new ArrayList<>();
            for (int t = 0; t < 8; t++) {
                GpuScheduler s = t % 2 == 0 ? s1 : s2;
                int thread = t;
                fs.add(pool.submit(() -> {
                    Random r = new Random(thread);
                    List<String[]> grants = new ArrayList<>(); // {released id or "", new id}
                    String mine = null;
                    for (int i = 0; i < 40; i++) {
                        GpuRequest req = GpuRequest.builder().count(1 + r.nextInt(3)).owner("t" + thread).build();
                        List<String> rel = mine == null ? List.of() : List.of(mine);
                        try {
                            Allocation got = s.releaseAndAllocate(rel, req);
                            grants.add(new String[]{mine == null ? "" : mine, got.id()});
                            mine = got.id();
                        } catch (GpuAllocationException e) {
                            if (!e.reason().isTransient()) {
                                throw e;
                            }
                            if (mine != null && r.nextBoolean()) {
                                s.release(mine); // give the others room now and then
                                mine = null;
                            }
                        }
                    }
                    return grants;
                }));
            }
            List<String[]> all = new ArrayList<>();
            for (Future<List<String[]>> f : fs) {
                all.addAll(f.get(100, TimeUnit.SECONDS));
            }
            pool.shutdown();
            assertThat(all).as("grants made").hasSizeGreaterThan(40);
            Map<String, Integer> line = assertNoGpuGrantedTwice(state);
            Map<String, Integer> releasedAt = releaseLines(state);
            for (String[] g : all) {
                assertThat(line).as("grant %s in the file", g[1]).containsKey(g[1]);
                if (!g[0].isEmpty()) {
                    assertThat(releasedAt).as("release of %s (swapped for %s)", g[0], g[1]).containsKey(g[0]);
                    assertThat(releasedAt.get(g[0])).as("%s released before %s was granted", g[0], g[1])
                            .isLessThan(line.get(g[1]));
                }
            }
        }
    }

    private static boolean hasEntry(Path dir) throws Exception {
        if (!Files.isDirectory(dir)) {
            return false;
        }
        try (Stream<Path> entries = Files.list(dir)) {
            return entries.findAny().isPresent();
        }
    }

    // --- this test's own reader of the ledger file: "<seq> <crc> <json>" lines after a header ---

    private static List<JsonNode> records(Path stateDir) throws Exception {
        ObjectMapper json = new ObjectMapper();
        List<String> lines = Files.readAllLines(stateDir.resolve("ledger"), StandardCharsets.UTF_8);
        assertThat(lines.get(0)).startsWith("gpusched-ledger ");
        List<JsonNode> out = new ArrayList<>();
        for (int i = 1; i < lines.size(); i++) {
            String l = lines.get(i);
            int a = l.indexOf(' ');
            int b = l.indexOf(' ', a + 1);
            JsonNode n = json.readTree(l.substring(b + 1));
            assertThat(n.path("op").asText()).as("no compaction snapshot in a short test ledger").isNotEqualTo("S");
            out.add(n);
        }
        return out;
    }

    /** @return the record number of each allocation record, after checking none takes a GPU a live record holds */
    static Map<String, Integer> assertNoGpuGrantedTwice(Path stateDir) throws Exception {
        Map<String, String> holder = new HashMap<>();
        Map<String, List<String>> gpus = new HashMap<>();
        Map<String, Integer> at = new HashMap<>();
        List<JsonNode> rs = records(stateDir);
        for (int i = 0; i < rs.size(); i++) {
            JsonNode n = rs.get(i);
            String id = n.path("id").asText();
            switch (n.path("op").asText()) {
                case "A" -> {
                    List<String> us = new ArrayList<>();
                    for (JsonNode u : n.get("devices")) {
                        assertThat(holder).as("record %d: %s takes %s", i, id, u.asText())
                                .doesNotContainKey(u.asText());
                        holder.put(u.asText(), id);
                        us.add(u.asText());
                    }
                    gpus.put(id, us);
                    at.put(id, i);
                }
                case "R" -> {
                    for (String u : gpus.getOrDefault(id, List.of())) {
                        holder.remove(u);
                    }
                }
                default -> {}
            }
        }
        return at;
    }

    private static Map<String, Integer> releaseLines(Path stateDir) throws Exception {
        Map<String, Integer> at = new HashMap<>();
        List<JsonNode> rs = records(stateDir);
        for (int i = 0; i < rs.size(); i++) {
            if (rs.get(i).path("op").asText().equals("R")) {
                assertThat(at.put(rs.get(i).path("id").asText(), i)).as("released twice: %s", rs.get(i)).isNull();
            }
        }
        return at;
    }

    private static long releaseRecordsOf(Path stateDir, String id) throws Exception {
        return records(stateDir).stream().filter(n -> n.path("op").asText().equals("R")
                && n.path("id").asText().equals(id)).count();
    }
}
