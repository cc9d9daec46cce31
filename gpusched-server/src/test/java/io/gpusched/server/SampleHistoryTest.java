package io.gpusched.server;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.MemorySize;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.testing.ManualClock;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The ten-minute sample history behind the sparklines, read over REST with an injected clock: each tick is made by
 * the test (no sampling thread) with values only that tick has, so every served point is traced back to the tick
 * that made it. Old points leave the window by time; the ring stays at its size whatever the uptime.
 */
class SampleHistoryTest {
    static final long T0 = Instant.parse("2026-01-01T00:00:00Z").toEpochMilli();

    @TempDir
    Path state;
    ManualClock clock = new ManualClock(Instant.ofEpochMilli(T0));
    SimulatedGpuInventory inventory;
    GpuScheduler scheduler;
    ConsoleServer console;
    HttpClient http = HttpClient.newHttpClient();
    ObjectMapper json = new ObjectMapper();

    @BeforeEach
    void start() {
        inventory = GpuInventories.simulated("pcie-4xa10");
        scheduler = GpuScheduler.builder().inventory(inventory).auditLogging(false).build();
        console = ConsoleServer.builder().scheduler(scheduler).inventory(inventory).stateDir(state).clock(clock)
                .sampleInterval(Duration.ofSeconds(1)).ticking(false)
                .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).build().start();
    }

    @AfterEach
    void stop() {
        console.close();
        scheduler.close();
        inventory.close();
    }

    /** tick n: GPU g reports util n % 100, memory n MiB + g, temperature 30 + g, power n + 0.5; the clock is at n s */
    void tick(int n) {
        clock.setMillis(T0 + n * 1000L);
        for (int g = 0; g < 4; g++) {
            inventory.setMetrics(g, n % 100, MemorySize.ofMebibytes(n + g), 30 + g, n + 0.5);
        }
        console.watcher().tick();
    }

    HttpResponse<String> get(String pathAndQuery) throws Exception {
        return http.send(HttpRequest.newBuilder(URI.create(console.url() + pathAndQuery)).build(),
                HttpResponse.BodyHandlers.ofString());
    }

    JsonNode samples(String query) throws Exception {
        HttpResponse<String> r = get("/api/v1/samples" + query);
        assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
        return json.readTree(r.body());
    }

    /** @return the tick numbers of a GPU's points, checking each point's values against the tick that made it */
    List<Integer> ticksOf(JsonNode points, int gpu) {
        List<Integer> ticks = new ArrayList<>();
        for (JsonNode p : points) {
            long t = p.get("t").asLong();
            assertThat((t - T0) % 1000).isZero();
            int n = (int) ((t - T0) / 1000);
            assertThat(p.get("util").asDouble()).isEqualTo(n % 100);
            assertThat(p.get("memUsed").asLong()).isEqualTo((n + gpu) * 1024L * 1024L);
            assertThat(p.get("temp").asDouble()).isEqualTo(30 + gpu);
            assertThat(p.get("power").asDouble()).isEqualTo(n + 0.5);
            ticks.add(n);
        }
        return ticks;
    }

    static List<Integer> range(int from, int toInclusive) {
        List<Integer> r = new ArrayList<>();
        for (int i = from; i <= toInclusive; i++) {
            r.add(i);
        }
        return r;
    }

    @Test
    void servesExactlyTheLastTenMinutesAndOldPointsDropOut() throws Exception {
        for (int n = 1; n <= 300; n++) {
            tick(n);
        }
        // five minutes of uptime: everything so far, for every GPU, oldest first
        JsonNode all = samples("?window=10m");
        assertThat(all.size()).isEqualTo(4);
        for (int g = 0; g < 4; g++) {
            assertThat(ticksOf(all.get(String.valueOf(g)), g)).isEqualTo(range(1, 300));
        }
        for (int n = 301; n <= 1500; n++) { // 25 minutes of uptime
            tick(n);
        }
        // now = 1500 s: the window is [900 s, 1500 s]
        JsonNode ten = samples("?window=10m");
        for (int g = 0; g < 4; g++) {
            assertThat(ticksOf(ten.get(String.valueOf(g)), g)).isEqualTo(range(900, 1500));
        }
        // the default window is ten minutes too; a shorter one is cut; a longer one gives what is kept
        assertThat(samples("").equals(ten)).isTrue();
        assertThat(ticksOf(samples("?window=90s").get("2"), 2)).isEqualTo(range(1410, 1500));
        assertThat(ticksOf(samples("?window=PT1M&gpu=3").get("3"), 3)).isEqualTo(range(1440, 1500));
        assertThat(ticksOf(samples("?window=1h").get("1"), 1)).isEqualTo(range(900, 1500));
        JsonNode one = samples("?gpu=1");
        assertThat(one.size()).isEqualTo(1);
        assertThat(one.has("1")).isTrue();

        // the sampler pauses (no tick) while time goes on: points leave the window by time, not by count
        clock.setMillis(T0 + 1500_000L + Duration.ofMinutes(6).toMillis());
        for (int g = 0; g < 4; g++) {
            assertThat(ticksOf(samples("").get(String.valueOf(g)), g)).isEqualTo(range(1260, 1500));
        }
        clock.setMillis(T0 + 1500_000L + Duration.ofMinutes(10).toMillis() + 1);
        for (int g = 0; g < 4; g++) {
            assertThat(samples("").get(String.valueOf(g))).isEmpty();
        }
    }

    @Test
    void theRingStaysAtItsSizeWhateverTheUptime() throws Exception {
        SampleHistory h = console.watcher().history();
        assertThat(h.capacity()).isEqualTo(601); // ten minutes at 1 s, both ends included
        // a clock that stands still (or ticks far faster than the interval): the window holds everything, so only
        // the ring's bound keeps memory fixed; 5,000 ticks leave the newest 601
        clock.setMillis(T0 + 1000);
        for (int n = 0; n < 5000; n++) {
            for (int g = 0; g < 4; g++) {
                inventory.setMetrics(g, n % 100, MemorySize.ofMebibytes(n), 40, 100);
            }
            console.watcher().tick();
        }
        JsonNode s = samples("");
        for (int g = 0; g < 4; g++) {
            JsonNode pts = s.get(String.valueOf(g));
            assertThat(pts.size()).isEqualTo(601);
            assertThat(pts.get(0).get("memUsed").asLong()).isEqualTo((5000 - 601) * 1024L * 1024L);
            assertThat(pts.get(600).get("memUsed").asLong()).isEqualTo(4999 * 1024L * 1024L);
        }
    }

    @Test
    void badWindowsAre400WithTheReason() throws Exception {
        for (String w : List.of("abc", "0s", "-5m", "10", "m", "10x", "PT-1M", "99999999999999999999h")) {
            HttpResponse<String> r = get("/api/v1/samples?window=" + w);
            assertThat(r.statusCode()).as(w + ": " + r.body()).isEqualTo(400);
            assertThat(r.body()).as(w).contains("window=");
        }
        HttpResponse<String> r = get("/api/v1/samples?gpu=x");
        assertThat(r.statusCode()).isEqualTo(400);
    }
}
