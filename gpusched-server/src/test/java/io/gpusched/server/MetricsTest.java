package io.gpusched.server;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.MemorySize;
import io.gpusched.core.sim.SimulatedGpuInventory;
import java.io.OutputStream;
import java.lang.ref.WeakReference;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** /metrics checked by Prometheus's own parser (promtool, Debian's prometheus package) and for dcgm's names. */
class MetricsTest {
    static final Path PROMTOOL = Path.of("/usr/bin/promtool");
    static final String[] DCGM = {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_XID_ERRORS"};

    @Test
    void metricsParseWithPromtoolAndCarryDcgmNamesAndLabels(@TempDir Path state) throws Exception {
        assumeTrue(Files.isExecutable(PROMTOOL), "skipped: needs promtool (Debian's prometheus package)");
        SimulatedGpuInventory inv = GpuInventories.simulated("pcie-4xa10");
        try (GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false).build();
             ConsoleServer c = ConsoleServer.builder().scheduler(s).inventory(inv).stateDir(state)
                     .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).build().start()) {
            inv.setMetrics(1, 73, MemorySize.ofGibibytes(6), 66, 150);
            inv.setHealth(3, GpuHealth.unhealthy("XID 79: GPU has fallen off the bus"));
            s.updateMetrics(inv.sample());
            s.allocate(GpuRequests.fromCliFlags("--gpu=1", "--owner=a"));
            try {
                s.allocate(GpuRequests.fromCliFlags("--gpu=9"));
            } catch (io.gpusched.core.GpuAllocationException expected) {
                // counted as a refusal
            }
            HttpResponse<String> r = HttpClient.newHttpClient().send(HttpRequest.newBuilder(
                    URI.create(c.url() + "/metrics")).build(), HttpResponse.BodyHandlers.ofString());
            assertThat(r.statusCode()).isEqualTo(200);
            String text = r.body();

            Process p = new ProcessBuilder(PROMTOOL.toString(), "check", "metrics").redirectErrorStream(true).start();
            try (OutputStream in = p.getOutputStream()) {
                in.write(text.getBytes(StandardCharsets.UTF_8));
            }
            String verdict = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
            // promtool exits 1 for lint advice too ("counter metrics should have _total"); parse errors say "error"
            assertThat(verdict).as(verdict).doesNotContainIgnoringCase("error while linting")
                    .doesNotContain("text format parsing error");

            Map<String, Double> gpu1 = new HashMap<>();
            Pattern line = Pattern.compile("^(DCGM_FI_DEV_\\w+)\\{([^}]*)} (\\S+)$", Pattern.MULTILINE);
            Matcher m = line.matcher(text);
            int series = 0;
            while (m.find()) {
                series++;
                Map<String, String> labels = new HashMap<>();
                Matcher l = Pattern.compile("(\\w+)=\"([^\"]*)\"").matcher(m.group(2));
                while (l.find()) {
                    labels.put(l.group(1), l.group(2));
                }
                assertThat(labels).containsOnlyKeys("gpu", "UUID", "device", "modelName", "Hostname");
                assertThat(labels.get("device")).isEqualTo("nvidia" + labels.get("gpu"));
                assertThat(labels.get("modelName")).isEqualTo("NVIDIA A10");
                assertThat(labels.get("UUID")).startsWith("GPU-");
                if (labels.get("gpu").equals("1")) {
                    gpu1.put(m.group(1), Double.parseDouble(m.group(3)));
                }
                if (labels.get("gpu").equals("3") && m.group(1).equals("DCGM_FI_DEV_XID_ERRORS")) {
                    assertThat(Double.parseDouble(m.group(3))).isEqualTo(79.0);
                }
            }
            assertThat(series).isEqualTo(6 * 4);
            for (String name : DCGM) {
                assertThat(text).contains("# TYPE " + name + " gauge");
            }
            assertThat(gpu1).containsEntry("DCGM_FI_DEV_GPU_UTIL", 73.0).containsEntry("DCGM_FI_DEV_FB_USED", 6144.0)
                    .containsEntry("DCGM_FI_DEV_FB_FREE", 24.0 * 1024 - 6144)
                    .containsEntry("DCGM_FI_DEV_GPU_TEMP", 66.0)
                    .containsEntry("DCGM_FI_DEV_POWER_USAGE", 150.0);
            assertThat(text).contains("gpusched_allocations_live 1.0")
                    .containsPattern("gpusched_refusals_total\\{reason=\"(INSUFFICIENT_GPUS|NODE_TOO_SMALL)\"} 1.0");
        }
    }

    /**
     * The DCGM series outlive a garbage collection. Micrometer's gauges hold their state object weakly, and the
     * console's {@code DcgmMeterBinder} was held by nothing else: the first collection that took it turned every
     * DCGM series into NaN for good (on JDK 25 the scrape in the test above already saw it, once).
     */
    @Test
    void dcgmSeriesOutliveAGarbageCollection(@TempDir Path state) throws Exception {
        SimulatedGpuInventory inv = GpuInventories.simulated("pcie-4xa10");
        try (GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false).build();
             ConsoleServer c = ConsoleServer.builder().scheduler(s).inventory(inv).stateDir(state)
                     .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).build().start()) {
            inv.setMetrics(1, 73, MemorySize.ofGibibytes(6), 66, 150);
            inv.setHealth(3, GpuHealth.unhealthy("XID 79: GPU has fallen off the bus"));
            s.updateMetrics(inv.sample());
            WeakReference<Object> collected = new WeakReference<>(new Object());
            for (int i = 0; i < 20 && collected.get() != null; i++) {
                System.gc(); // until a collection has taken what only a weak reference held
            }
            assertThat(collected.get()).as("a collection ran").isNull();
            String text = HttpClient.newHttpClient().send(HttpRequest.newBuilder(URI.create(c.url() + "/metrics"))
                    .build(), HttpResponse.BodyHandlers.ofString()).body();
            assertThat(text).containsPattern("DCGM_FI_DEV_GPU_UTIL\\{[^}]*gpu=\"1\"[^}]*} 73.0")
                    .containsPattern("DCGM_FI_DEV_XID_ERRORS\\{[^}]*gpu=\"3\"[^}]*} 79.0");
        }
    }
}
