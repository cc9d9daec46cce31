package io.gpusched.server;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.SimulatedGpuInventory;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The event stream carries changes, not the whole state each time (issue 36 item 5: 300 shared allocations with
 * 10 KB owners once made each {@code state} event 28.5 MB): one {@code state} first, then {@code delta}s. Checked by a
 * client that applies the deltas itself (its own code, not the page's) and compares what it ends with to
 * {@code GET /api/v1/allocations}; every delta stays small, and every text field the console sends is bounded.
 */
@Timeout(value = 5, unit = TimeUnit.MINUTES) // a hang guard, not a measurement
class EventDeltasTest {
    static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path state;

    /** One server-sent event. */
    record Event(String name, String data) {
    }

    /** Reads server-sent events from {@code lines} into {@code out}. */
    static void parse(Stream<String> lines, BlockingQueue<Event> out) {
        String[] name = {null};
        StringBuilder data = new StringBuilder();
        lines.forEach(line -> {
            if (line.isEmpty()) {
                if (name[0] != null) {
                    out.add(new Event(name[0], data.toString()));
                }
                name[0] = null;
                data.setLength(0);
            } else if (line.startsWith("event: ")) {
                name[0] = line.substring(7);
            } else if (line.startsWith("data: ")) {
                if (data.length() > 0) {
                    data.append('\n');
                }
                data.append(line.substring(6));
            }
        });
    }

    /** A stream of the console's events, parsed into {@code events} by a thread of its own. */
    record Subscription(HttpResponse<Stream<String>> response, BlockingQueue<Event> events) {
    }

    /** @return a new subscription to {@code c}'s event stream */
    static Subscription subscribe(HttpClient http, ConsoleServer c) throws Exception {
        BlockingQueue<Event> events = new LinkedBlockingQueue<>();
        HttpResponse<Stream<String>> r = http.send(HttpRequest.newBuilder(URI.create(c.url() + "/api/v1/events"))
                .timeout(Duration.ofSeconds(60)).build(), HttpResponse.BodyHandlers.ofLines());
        Thread reader = new Thread(() -> parse(r.body(), events), "sse-reader");
        reader.setDaemon(true);
        reader.start();
        return new Subscription(r, events);
    }

    static Event next(BlockingQueue<Event> q, String name) throws InterruptedException {
        while (true) {
            Event e = q.poll(60, TimeUnit.SECONDS);
            assertThat(e).as("a %s event within 60 s", name).isNotNull();
            if (e.name().equals(name)) {
                return e;
            }
        }
    }

    @Test
    void deltasRebuildTheStateAndStaySmall() throws Exception {
        SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100");
        try (GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false).build();
             ConsoleServer c = ConsoleServer.builder().scheduler(s).stateDir(state).ticking(false)
                     .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).build().start()) {
            String held = s.allocate(GpuRequests.fromCliFlags("--gpu=2", "--owner=before")).id();
            HttpClient http = HttpClient.newHttpClient();
            Subscription rs = subscribe(http, c);
            BlockingQueue<Event> events = rs.events();
            HttpResponse<Stream<String>> r = rs.response();
            assertThat(r.statusCode()).isEqualTo(200);
            JsonNode first = JSON.readTree(next(events, "state").data());
            Map<String, JsonNode> mine = new LinkedHashMap<>();
            first.path("allocations").forEach(a -> mine.put(a.path("id").asText(), a));
            assertThat(mine).containsOnlyKeys(held);

            // 240 shared allocations (6 free GPUs x gpu.max_shared_per_gpu 48 = 288 at most) with owners as long as a
            // request allows (128 characters, issue 36), then half of them released
            String longOwner = "o".repeat(125);
            List<String> ids = new ArrayList<>();
            for (int i = 0; i < 240; i++) {
                ids.add(s.allocate(GpuRequests.fromCliFlags("--gpu=1", "--shared=32MiB", "--owner=" + longOwner + i))
                        .id());
            }
            for (int i = 0; i < 240; i += 2) {
                s.release(ids.get(i));
            }
            s.release(held);
            String marker = s.allocate(GpuRequests.fromCliFlags("--gpu=1", "--owner=last")).id();
            int deltas = 0;
            long largest = 0;
            while (!mine.containsKey(marker)) {
                Event e = next(events, "delta");
                deltas++;
                largest = Math.max(largest, e.data().length());
                JsonNode d = JSON.readTree(e.data());
                d.path("allocations").path("remove").forEach(id -> mine.remove(id.asText()));
                d.path("allocations").path("upsert").forEach(a -> mine.put(a.path("id").asText(), a));
            }
            assertThat(deltas).as("one delta per change, at most").isLessThanOrEqualTo(362);
            assertThat(largest).as("the largest delta, in characters").isLessThan(4096);
            // what the client built from the deltas is what the server says, field for field
            JsonNode served = JSON.readTree(SlowEventClientsAttackTest.get(c, "/api/v1/allocations")
                    .split("\r\n\r\n", 2)[1]);
            Map<String, JsonNode> truth = new LinkedHashMap<>();
            served.forEach(a -> truth.put(a.path("id").asText(), a));
            assertThat(mine).isEqualTo(truth);
            assertThat(truth).hasSize(121);
            // an owner within the bounds is sent whole (longer ones never enter the ledger; Views.bounded cuts what an
            // older ledger may hold)
            JsonNode one = truth.values().stream().filter(a -> a.path("owner").asText().startsWith("ooo"))
                    .findFirst().orElseThrow();
            assertThat(one.path("owner").asText()).startsWith(longOwner).doesNotContain("\u2026");
            // a stream opened now starts from the same state, whole
            Subscription r2s = subscribe(http, c);
            BlockingQueue<Event> later = r2s.events();
            Map<String, JsonNode> fresh = new LinkedHashMap<>();
            JSON.readTree(next(later, "state").data()).path("allocations")
                    .forEach(x -> fresh.put(x.path("id").asText(), x));
            assertThat(fresh).isEqualTo(truth);
        } finally {
            inv.close();
        }
    }
    /**
     * While no client subscribes the console sends nothing and builds no JSON for the changes; a stream opened after
     * changes nobody watched starts from the state then, and its first delta carries the next change only: no
     * allocation the client already has sent again, no removal of one it never had.
     */
    @Test
    void aStreamOpenedAfterChangesNobodyWatchedGetsOnlyTheNextChange() throws Exception {
        SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100");
        try (GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false).build();
             ConsoleServer c = ConsoleServer.builder().scheduler(s).stateDir(state).ticking(false)
                     .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).build().start()) {
            HttpClient http = HttpClient.newHttpClient();
            Subscription rs = subscribe(http, c);
            BlockingQueue<Event> first = rs.events();
            HttpResponse<Stream<String>> r = rs.response();
            next(first, "state");
            String gone = s.allocate(GpuRequests.fromCliFlags("--gpu=1", "--owner=seen")).id();
            assertThat(next(first, "delta").data()).contains(gone);
            r.body().close(); // the watcher leaves; the console notices at a write that fails
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (c.watcher().subscribers() > 0 && System.nanoTime() < deadline) {
                s.release(s.allocate(GpuRequests.fromCliFlags("--gpu=1", "--owner=probe")).id());
                Thread.sleep(20);
            }
            assertThat(c.watcher().subscribers()).as("stream clients once the only one left").isZero();
            // nobody watches these
            s.release(gone);
            String held = s.allocate(GpuRequests.fromCliFlags("--gpu=2", "--owner=unseen")).id();

            Subscription r2s = subscribe(http, c);
            BlockingQueue<Event> later = r2s.events();
            HttpResponse<Stream<String>> r2 = r2s.response();
            List<String> start = new ArrayList<>();
            JSON.readTree(next(later, "state").data()).path("allocations").forEach(a -> start.add(a.path("id")
                    .asText()));
            assertThat(start).containsExactly(held);
            String made = s.allocate(GpuRequests.fromCliFlags("--gpu=1", "--owner=next")).id();
            JsonNode d = JSON.readTree(next(later, "delta").data());
            List<String> upserted = new ArrayList<>();
            d.path("allocations").path("upsert").forEach(a -> upserted.add(a.path("id").asText()));
            assertThat(upserted).as("allocations in the first delta (%s)", d).containsExactly(made);
            assertThat(d.path("allocations").path("remove")).as("removals in the first delta (%s)", d).isEmpty();
            r2.body().close();
        } finally {
            inv.close();
        }
    }

    /**
     * The scheduler fires its events in the thread that made the change (here the test's; in the node service a
     * client's or the fair queue's); the console pushes what changed from its own thread, so a change never waits for
     * the console's pushes (each catches up with the node ledger). Held here: the watcher's monitor, which every push
     * takes. The change goes out once the push can run, and nothing is lost meanwhile.
     */
    @Test
    void changesDoNotWaitForTheConsolesPushes() throws Exception {
        SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100");
        ExecutorService changer = Executors.newSingleThreadExecutor();
        try (GpuScheduler s = GpuScheduler.builder().inventory(inv).stateDir(state.resolve("node"))
                .auditLogging(false).maintenanceInterval(Duration.ZERO).build();
             ConsoleServer c = ConsoleServer.builder().scheduler(s).stateDir(state).ticking(false)
                     .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).build().start()) {
            HttpClient http = HttpClient.newHttpClient();
            Subscription rs = subscribe(http, c);
            BlockingQueue<Event> events = rs.events();
            assertThat(JSON.readTree(next(events, "state").data()).path("allocations")).isEmpty();
            List<String> ids = new ArrayList<>();
            synchronized (c.watcher()) {
                for (int i = 0; i < 3; i++) {
                    Future<String> made = changer.submit(() -> s.allocate(GpuRequests.fromCliFlags("--gpu=1"))
                            .id());
                    // pushed in line, the allocation would wait for this monitor: a hang, cut by the bound
                    ids.add(made.get(60, TimeUnit.SECONDS));
                }
                assertThat(changer.submit(() -> s.release(ids.get(0))).get(60, TimeUnit.SECONDS)).isTrue();
            }
            Map<String, JsonNode> mine = new LinkedHashMap<>();
            while (!mine.keySet().equals(Set.copyOf(ids.subList(1, 3)))) {
                JsonNode d = JSON.readTree(next(events, "delta").data());
                d.path("allocations").path("upsert").forEach(a -> mine.put(a.path("id").asText(), a));
                d.path("allocations").path("remove").forEach(id -> mine.remove(id.asText()));
            }
        } finally {
            changer.shutdownNow();
            inv.close();
        }
    }
}
