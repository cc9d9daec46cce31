package io.gpusched.server;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.accounting.AccountingRecord.Interval;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.IdlePolicy;
import io.gpusched.accounting.RecordCodec;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.NodeDescriptions;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.core.sim.UsageTrace;
import io.gpusched.testing.ManualClock;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The console is the node's accounting sampler: its ticks feed accounting, {@code /api/v1/usage} serves the report,
 * {@code /metrics} the per-owner counters with bounded cardinality, and a second console on the node stays passive.
 */
class UsageRoutesTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private final HttpClient http = HttpClient.newHttpClient();

    private HttpResponse<String> get(ConsoleServer c, String path) throws Exception {
        return http.send(HttpRequest.newBuilder(URI.create(c.url() + path)).build(),
                HttpResponse.BodyHandlers.ofString());
    }

    @Test
    void ticksFeedAccountingAndTheApiServesTheReport(@TempDir Path state) throws Exception {
        ManualClock clock = new ManualClock(Instant.parse("2026-04-01T08:00:00Z"));
        SimulatedGpuInventory inv = NodeDescriptions.profile("pcie-4xa10", clock);
        inv.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 60));
        try (GpuScheduler s = GpuScheduler.builder().inventory(inv).clock(clock).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).build();
             ConsoleServer c = ConsoleServer.builder().scheduler(s).stateDir(state).clock(clock).ticking(false)
                     .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).build().start();
             ConsoleServer second = ConsoleServer.builder().scheduler(s).stateDir(state).clock(clock).ticking(false)
                     .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).build()) {
            assertThat(c.sampler()).isPresent();
            assertThat(second.sampler()).as("one sampler per node").isEmpty();
            c.watcher().tick();
            Allocation a = s.allocate(GpuRequests.fromCliFlags("--devices=0", "--owner=alice", "--job=j1"));
            for (int i = 0; i < 6; i++) {
                clock.advance(Duration.ofSeconds(10));
                c.watcher().tick();
            }
            s.release(a.id());

            HttpResponse<String> r = get(c, "/api/v1/usage?by=owner&since=1h");
            assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
            JsonNode rep = JSON.readTree(r.body());
            JsonNode alice = rep.get("rows").get(0);
            assertThat(alice.get("key").asText()).isEqualTo("alice");
            assertThat(alice.get("gpuSeconds").asDouble()).isEqualTo(60.0);
            assertThat(alice.get("meanUtilization").asDouble()).isEqualTo(60.0);
            assertThat(alice.get("energyEstimated").asBoolean()).as("the A10's energy counter").isFalse();
            assertThat(rep.get("allocations").asInt()).isEqualTo(1);

            JsonNode one = JSON.readTree(get(c, "/api/v1/usage?allocation=" + URLEncoder.encode(a.id(),
                    StandardCharsets.UTF_8)).body());
            assertThat(one.get("verdict").asText()).startsWith("1 GPU, 0.02 GPU-hours, 60 % mean utilization");
            assertThat(one.get("end").asText()).isEqualTo("RELEASED");

            assertThat(get(c, "/api/v1/usage?allocation=nope").statusCode()).isEqualTo(404);
            assertThat(get(c, "/api/v1/usage?by=planet").statusCode()).isEqualTo(400);
            HttpResponse<String> arabic = get(c, "/api/v1/usage?since=" + URLEncoder.encode("\u0663d",
                    StandardCharsets.UTF_8));
            assertThat(arabic.statusCode()).isEqualTo(400);
            assertThat(arabic.body()).contains("is not a time");
            assertThat(get(c, "/api/v1/usage?since=1h&since=2h").statusCode()).isEqualTo(400);
            assertThat(get(c, "/api/v1/usage/idle").statusCode()).isEqualTo(200);

            String metrics = get(c, "/metrics").body();
            assertThat(metrics).contains("gpusched_usage_gpu_seconds_total{owner=\"alice\"} 60.0");
            assertThat(metrics).contains("gpusched_usage_idle_seconds_total{owner=\"alice\"} 0.0");
        }
    }

    @Test
    void idleStepsReachTheAuditAndTheHolderIsWarnedBeforeTheRelease(@TempDir Path state) throws Exception {
        ManualClock clock = new ManualClock(Instant.parse("2026-04-02T08:00:00Z"));
        SimulatedGpuInventory inv = NodeDescriptions.profile("pcie-4xa10", clock);
        inv.setTrace(1, UsageTrace.of(Duration.ofSeconds(10), 0));
        AccountingSettings settings = AccountingSettings.defaults().withIdle(new IdlePolicy(1, Duration.ofMinutes(1),
                Duration.ofMinutes(2), Duration.ofMinutes(3), IdlePolicy.Action.RELEASE, "TERM", Duration.ZERO,
                List.of(), false, List.of()));
        try (GpuScheduler s = GpuScheduler.builder().inventory(inv).clock(clock).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).build();
             ConsoleServer c = ConsoleServer.builder().scheduler(s).stateDir(state).clock(clock).ticking(false)
                     .accounting(settings).listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0))
                     .build().start()) {
            c.watcher().tick();
            Allocation a = s.allocate(GpuRequests.fromCliFlags("--devices=1", "--owner=ivy"));
            for (int i = 0; i < 20; i++) {
                clock.advance(Duration.ofSeconds(10));
                c.watcher().tick();
            }
            JsonNode audit = JSON.readTree(get(c, "/api/v1/audit").body());
            List<String> types = new ArrayList<>();
            audit.forEach(e -> types.add(e.get("type").asText()));
            assertThat(types).containsSubsequence("IDLE_FLAGGED", "IDLE_WARNED", "IDLE_RELEASED");
            assertThat(s.allocations()).as("released by the idle policy").isEmpty();
            audit.forEach(e -> {
                if (e.get("type").asText().startsWith("IDLE_")) {
                    assertThat(e.get("allocationId").asText()).isEqualTo(a.id());
                    assertThat(e.get("owner").asText()).isEqualTo("ivy");
                }
            });
        }
    }

    @Test
    void perOwnerSeriesAreBoundedAndOnlyGrow() {
        PrometheusMeterRegistry r = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
        UsageMeters m = new UsageMeters(r);
        for (int i = 0; i < 250; i++) {
            m.onInterval(interval("owner-" + i));
        }
        m.onInterval(interval("owner-3"));
        assertThat(m.series()).isEqualTo(UsageMeters.MAX_OWNERS + 1);
        String scrape = r.scrape();
        assertThat(scrape).contains("gpusched_usage_gpu_seconds_total{owner=\"owner-3\"} 2.0");
        assertThat(scrape).contains("gpusched_usage_gpu_seconds_total{owner=\"_other\"} 150.0");
        assertThat(scrape.lines().filter(l -> l.startsWith("gpusched_usage_gpu_seconds_total{")).count())
                .isEqualTo(UsageMeters.MAX_OWNERS + 1);
    }

    @Test
    void anOwnerNamedDashIsNotCountedWithAllocationsWithoutOwner() {
        PrometheusMeterRegistry r = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
        UsageMeters m = new UsageMeters(r);
        m.onInterval(interval("-"));
        m.onInterval(interval(null));
        m.onInterval(interval(null));
        assertThat(m.series()).isEqualTo(2);
        String scrape = r.scrape();
        assertThat(scrape).contains("gpusched_usage_gpu_seconds_total{owner=\"-\"} 1.0");
        assertThat(scrape).contains("gpusched_usage_gpu_seconds_total{owner=\"\"} 2.0");
    }

    /** An interval of one GPU held 1 s, as the store would read it (null owner: none). */
    private static Interval interval(String owner) {
        String json = "{\"k\":\"i\",\"id\":\"x\"," + (owner == null ? "" : "\"owner\":" + quote(owner) + ",")
                + "\"from\":0,\"to\":1000,"
                + "\"gpus\":[{\"i\":0,\"uuid\":\"GPU-0\",\"held\":1000,\"meas\":0,\"um\":0,\"us\":0,\"idle\":0,"
                + "\"e\":0,\"ee\":0,\"em\":0}]}";
        CRC32C c = new CRC32C();
        byte[] b = json.getBytes(StandardCharsets.UTF_8);
        c.update(b, 0, b.length);
        return (Interval) RecordCodec.decode(String.format("%08x", c.getValue()) + " " + json);
    }

    private static String quote(String s) {
        try {
            return JSON.writeValueAsString(s);
        } catch (JsonProcessingException e) {
            throw new IllegalStateException(e);
        }
    }
}
