package io.gpusched.server.adversarial;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.MemorySize;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.server.ConsoleServer;
import io.gpusched.testing.ManualClock;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Predicate;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * GET /api/v1/samples through HTTP only: window and gpu parsing against the grammar the OpenAPI document gives
 * ("10m, 90s, 1h, 500ms or ISO-8601 PT10M"; gpu "one device index"; 400 "bad gpu or window"), and the history cut
 * checked against a clock the test moves (an independent model: a point is served iff now - window <= t).
 */
@Tag("adversarial")
class SamplesEndpointAttackTest {
    static final long T0 = 1_700_000_000_000L;
    static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path state;
    SimulatedGpuInventory inventory;
    GpuScheduler scheduler;
    ConsoleServer server;
    RawHttp http;
    final ManualClock clock = new ManualClock(Instant.ofEpochMilli(T0));

    @BeforeEach
    void start() {
        inventory = GpuInventories.simulated("pcie-4xa10");
        scheduler = GpuScheduler.builder().inventory(inventory).auditLogging(false).build();
        server = ConsoleServer.builder().scheduler(scheduler).inventory(inventory).stateDir(state)
                .clock(clock).sampleInterval(Duration.ofMillis(20))
                .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).build().start();
        http = new RawHttp(server.address());
    }

    @AfterEach
    void stop() {
        server.close();
        scheduler.close();
        inventory.close();
    }

    RawHttp.Resp get(String query) throws Exception {
        return http.req("GET", "/api/v1/samples" + query, null);
    }

    JsonNode samples(String query) throws Exception {
        RawHttp.Resp r = get(query);
        assertThat(r.status()).as("GET samples%s: %s", query, r).isEqualTo(200);
        return JSON.readTree(r.body());
    }

    static String enc(String s) {
        return URLEncoder.encode(s, StandardCharsets.UTF_8);
    }

    /** waits (bounded) until gpu's history holds a point that matches */
    void awaitPoint(int gpu, Predicate<JsonNode> p) throws Exception {
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (System.nanoTime() < deadline) {
            for (JsonNode n : samples("?gpu=" + gpu).path(Integer.toString(gpu))) {
                if (p.test(n)) {
                    return;
                }
            }
            Thread.sleep(20);
        }
        throw new AssertionError("no matching sample point for GPU " + gpu + " within 60 s");
    }

    static List<Long> times(JsonNode points) {
        List<Long> t = new ArrayList<>();
        points.forEach(n -> t.add(n.get("t").asLong()));
        return t;
    }

    @Test
    void malformedWindowsAre400NamingTheWindow() throws Exception {
        List<String> bad = List.of("-5m", "0s", "0", "0ms", "-0ms", "PT0S", "-PT1M", "PT-1M", "abc", "", "m", "ms",
                "10", "10x", "10M", "1e3s", "1.5m", "0x10s", "10 m", "99999999999999999999h",
                "9223372036854775807h", "9223372036854775807m", "PT9999999999999999999H", "P1Y", "--10m", "10mm",
                "%zz");
        for (String w : bad) {
            String q = w.equals("%zz") ? "?window=%zz" : "?window=" + enc(w);
            RawHttp.Resp r = get(q);
            assertThat(r.status()).as("window=%s -> %s", w, r).isEqualTo(400);
            if (w.equals("%zz")) {
                continue; // not a URI: the JDK's own HTML 400 answers before any handler runs
            }
            JsonNode e = JSON.readTree(r.body());
            assertThat(e.path("status").asInt()).isEqualTo(400);
            assertThat(e.path("error").asText()).as("message for window=%s", w).contains("window");
        }
        // the huge but well-formed ones are clamped to the ten minutes kept, not errors
        for (String w : List.of("9999999999999h", "9223372036854775807ms", "PT2562047788015215H", "1h", "11m")) {
            assertThat(get("?window=" + enc(w)).status()).as("window=%s", w).isEqualTo(200);
        }
    }

    @Test
    void malformedGpuIsA400() throws Exception {
        for (String g : List.of("abc", "", "1.0", "0x1", "2147483648", "-2147483649", "1e0", "1 ")) {
            RawHttp.Resp r = get("?gpu=" + enc(g));
            assertThat(r.status()).as("gpu=%s -> %s", g, r).isEqualTo(400);
            assertThat(JSON.readTree(r.body()).path("error").asText()).contains("gpu");
        }
    }

    @Test
    void gpuThatIsNotADeviceOfTheNodeIs400() throws Exception {
        awaitPoint(0, n -> true);
        for (String g : List.of("-1", "4", "99", "2147483647", "-2147483648")) {
            RawHttp.Resp r = get("?gpu=" + g);
            assertThat(r.status()).as("gpu=%s on a node with GPUs 0..3 -> %s", g, r).isEqualTo(400);
        }
    }

    @Test
    void nonAsciiDigitsAndPlusSignsAreNotInTheGrammar() throws Exception {
        for (String w : List.of("\u0661\u0660m", "+10m", "\uff11\uff10s", "\u0661\u0660\u0660ms")) {
            RawHttp.Resp r = get("?window=" + enc(w));
            assertThat(r.status()).as("window=%s -> %s", w, r).isEqualTo(400);
        }
        // trim() also strips control characters: a NUL or a vertical tab around the value is taken as no character
        for (String w : List.of("10m\u0000", "\u000b10m")) {
            RawHttp.Resp r = get("?window=" + enc(w));
            assertThat(r.status()).as("window=%s -> %s", w, r).isEqualTo(400);
        }
        for (String g : List.of("\u0661", "+1", "\uff11")) {
            RawHttp.Resp r = get("?gpu=" + enc(g));
            assertThat(r.status()).as("gpu=%s -> %s", g, r).isEqualTo(400);
        }
    }

    @Test
    void repeatedParametersAreRefusedNotFirstOneWins() throws Exception {
        awaitPoint(1, n -> true);
        for (String q : List.of("?window=10m&window=abc", "?window=1m&window=10m", "?gpu=1&gpu=2",
                "?gpu=1&gpu=abc")) {
            RawHttp.Resp r = get(q);
            assertThat(r.status()).as("%s -> %s", q, r).isEqualTo(400);
        }
    }

    @Test
    void historyCutFollowsTheInjectedClockAndGivesOnlyTheAskedGpu() throws Exception {
        inventory.setMetrics(1, 10, MemorySize.ofGibibytes(2), 40, 100);
        awaitPoint(1, n -> n.path("t").asLong() == T0 && n.path("util").asDouble() == 10.0);
        long t1 = T0 + Duration.ofMinutes(5).toMillis();
        inventory.setMetrics(1, 50, MemorySize.ofGibibytes(3), 60, 200);
        clock.setMillis(t1);
        awaitPoint(1, n -> n.path("t").asLong() == t1 && n.path("util").asDouble() == 50.0);

        // only GPU 1, and every key is a device of the node
        JsonNode one = samples("?gpu=1");
        assertThat(one.size()).isEqualTo(1);
        assertThat(one.has("1")).isTrue();
        JsonNode all = samples("");
        List<String> keys = new ArrayList<>();
        all.fieldNames().forEachRemaining(keys::add);
        assertThat(keys).containsExactly("0", "1", "2", "3");

        // by the model: served iff now - window <= t; and each value is what the GPU reported at that time
        check(samples("?gpu=1&window=1m").get("1"), t1, Duration.ofMinutes(1));
        check(samples("?gpu=1&window=10m").get("1"), t1, Duration.ofMinutes(10));
        check(samples("?gpu=1&window=PT5M").get("1"), t1, Duration.ofMinutes(5));
        check(samples("?gpu=1&window=299999ms").get("1"), t1, Duration.ofMillis(299_999));
        assertThat(times(samples("?gpu=1&window=10m").get("1"))).contains(T0, t1);
        assertThat(times(samples("?gpu=1&window=299999ms").get("1"))).doesNotContain(T0).contains(t1);

        // ten minutes and a millisecond after T0: the T0 points are never served again, whatever window is asked
        long t2 = T0 + Duration.ofMinutes(10).toMillis() + 1;
        clock.setMillis(t2);
        for (String q : List.of("?gpu=1", "?gpu=1&window=10m", "?gpu=1&window=1h", "?gpu=1&window=9999999999999h")) {
            JsonNode pts = samples(q).get("1");
            assertThat(times(pts)).as(q).doesNotContain(T0).contains(t1);
            check(pts, t2, Duration.ofMinutes(10));
        }
    }

    /** every point within [now - window, now], oldest first, with the value set for its time */
    static void check(JsonNode points, long now, Duration window) {
        long prev = Long.MIN_VALUE;
        for (Iterator<JsonNode> it = points.elements(); it.hasNext();) {
            JsonNode p = it.next();
            long t = p.get("t").asLong();
            assertThat(t).as("point %s within window %s of %s", p, window, now)
                    .isBetween(now - window.toMillis(), now);
            assertThat(t).as("oldest first").isGreaterThanOrEqualTo(prev);
            prev = t;
            if (t == T0 + Duration.ofMinutes(5).toMillis()) {
                assertThat(p.get("util").asDouble()).isEqualTo(50.0);
                assertThat(p.get("memUsed").asLong()).isEqualTo(3L << 30);
                assertThat(p.get("temp").asDouble()).isEqualTo(60.0);
                assertThat(p.get("power").asDouble()).isEqualTo(200.0);
            }
        }
    }

    @Test
    void clockSteppedBackStillServesOldestFirstAndNothingFromTheFuture() throws Exception {
        long later = T0 + Duration.ofMinutes(5).toMillis();
        clock.setMillis(later);
        awaitPoint(2, n -> n.path("t").asLong() == later);
        long back = T0 + Duration.ofMinutes(1).toMillis();
        clock.setMillis(back);
        awaitPoint(2, n -> n.path("t").asLong() == back);
        List<Long> t = times(samples("?gpu=2").get("2"));
        assertThat(t).as("oldest first after a clock step back").isSorted();
        assertThat(t).as("no point after now (%s)", back).allMatch(x -> x <= back);
    }

    @Test
    void subMillisecondIntervalIsRefusedAtBuildOrRuns() throws Exception {
        ConsoleServer.Builder b = ConsoleServer.builder().scheduler(scheduler).inventory(inventory)
                .stateDir(state).listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
        try {
            b.sampleInterval(Duration.ofNanos(500_000));
        } catch (IllegalArgumentException refused) {
            return; // refused where it is set: fine
        }
        ConsoleServer s = b.build();
        try {
            s.start();
        } catch (RuntimeException e) {
            boolean stillListening;
            try (Socket probe = new Socket(s.address().getAddress(), s.address().getPort())) {
                stillListening = probe.isConnected();
            } catch (Exception ex) {
                stillListening = false;
            }
            throw new AssertionError("sampleInterval(0.5 ms) was accepted by the builder but start() threw " + e
                    + (stillListening ? "; the HTTP port " + s.address() + " is left listening" : ""), e);
        } finally {
            s.close();
        }
    }
}
