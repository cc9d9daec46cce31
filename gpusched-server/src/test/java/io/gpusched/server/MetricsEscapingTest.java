package io.gpusched.server;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * /metrics with hostile label values: a simulated node whose device names and UUIDs hold {@code "}, {@code \}, a
 * newline and non-ASCII text, and a host name with the same. The exposition text must parse with the real promtool
 * and, with an independent strict parser written here (the format's three escapes, nothing else), give back every
 * label value exactly as it was.
 */
class MetricsEscapingTest {
    static final Path PROMTOOL = Path.of("/usr/bin/promtool");
    // issue 36: names with control characters (a newline) and UUIDs that are not plain tokens (quotes, backslashes)
    // are refused where node descriptions and inventories enter; names keep quotes, backslashes and Unicode, and the
    // host name (not a device identifier) still carries a newline
    static final String[] NAMES = {"GPU \"zero\" \\ back\\slash", "line one line two \\n not a newline",
        "Ünïcødé 名前 \"\\\"", "<b>&amp;</b> 'single' }{ ,= \\\""};
    static final String[] UUIDS = {"GPU-q-0", "GPU-1", "MIG-GPU-2/1/0", "GPU-3:x.y_z"};
    static final String HOST = "host \"a\"\\b\nc é";

    /** One sample: name, labels in order, value text. */
    record Sample(String name, Map<String, String> labels, String value) {
    }

    /**
     * A strict parser of the Prometheus text format's sample lines: label values are double-quoted with exactly the
     * escapes backslash-backslash, backslash-quote and backslash-n; a raw newline in a value or any other escape is an
     * error.
     */
    static List<Sample> parse(String text) {
        List<Sample> out = new ArrayList<>();
        int i = 0;
        int n = text.length();
        while (i < n) {
            if (text.charAt(i) == '#') {
                int e = text.indexOf('\n', i);
                i = e < 0 ? n : e + 1;
                continue;
            }
            if (text.charAt(i) == '\n') {
                i++;
                continue;
            }
            int start = i;
            while (i < n && (Character.isLetterOrDigit(text.charAt(i)) || text.charAt(i) == '_'
                    || text.charAt(i) == ':')) {
                i++;
            }
            String name = text.substring(start, i);
            if (name.isEmpty()) {
                throw new IllegalStateException("no metric name at " + start + ": " + snippet(text, start));
            }
            Map<String, String> labels = new LinkedHashMap<>();
            if (i < n && text.charAt(i) == '{') {
                i++;
                while (text.charAt(i) != '}') {
                    int ks = i;
                    while (Character.isLetterOrDigit(text.charAt(i)) || text.charAt(i) == '_') {
                        i++;
                    }
                    String key = text.substring(ks, i);
                    if (key.isEmpty() || text.charAt(i) != '=' || text.charAt(i + 1) != '"') {
                        throw new IllegalStateException("bad label at " + ks + ": " + snippet(text, ks));
                    }
                    i += 2;
                    StringBuilder v = new StringBuilder();
                    while (true) {
                        char c = text.charAt(i++);
                        if (c == '"') {
                            break;
                        }
                        if (c == '\n') {
                            throw new IllegalStateException("raw newline in the value of " + key);
                        }
                        if (c == '\\') {
                            char e = text.charAt(i++);
                            switch (e) {
                                case '\\' -> v.append('\\');
                                case '"' -> v.append('"');
                                case 'n' -> v.append('\n');
                                default -> throw new IllegalStateException("escape \\" + e + " in " + key);
                            }
                        } else {
                            v.append(c);
                        }
                    }
                    if (labels.put(key, v.toString()) != null) {
                        throw new IllegalStateException("label " + key + " twice");
                    }
                    if (text.charAt(i) == ',') {
                        i++;
                    } else if (text.charAt(i) != '}') {
                        throw new IllegalStateException("after a label: " + snippet(text, i));
                    }
                }
                i++;
            }
            if (text.charAt(i) != ' ') {
                throw new IllegalStateException("no space before the value: " + snippet(text, i));
            }
            int e = text.indexOf('\n', i);
            String value = text.substring(i + 1, e < 0 ? n : e).trim();
            Double.parseDouble(value.split(" ")[0].replace("+Inf", "Infinity").replace("-Inf", "-Infinity"));
            out.add(new Sample(name, labels, value));
            i = e < 0 ? n : e + 1;
        }
        return out;
    }

    static String snippet(String t, int at) {
        return t.substring(Math.max(0, at - 30), Math.min(t.length(), at + 30)).replace("\n", "⏎");
    }

    static String yamlQuoted(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n") + "\"";
    }

    static void promtool(String text) throws Exception {
        assumeTrue(Files.isExecutable(PROMTOOL), "skipped: needs promtool (Debian's prometheus package)");
        Process p = new ProcessBuilder(PROMTOOL.toString(), "check", "metrics").redirectErrorStream(true).start();
        try (OutputStream in = p.getOutputStream()) {
            in.write(text.getBytes(StandardCharsets.UTF_8));
        }
        String verdict = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
        // exit 1 may be lint advice only; a parse failure says "error while linting" / "parsing error"
        assertThat(verdict).as(verdict).doesNotContainIgnoringCase("error while linting")
                .doesNotContainIgnoringCase("parsing error").doesNotContainIgnoringCase("invalid");
    }

    @Test
    void hostileLabelValuesReadBackExactly(@TempDir Path dir) throws Exception {
        StringBuilder yaml = new StringBuilder("node: hostile\ndriver_version: \"535.1\"\n"
                + "defaults: {vendor: NVIDIA, memory: 16GiB}\ndevices:\n");
        for (int g = 0; g < NAMES.length; g++) {
            yaml.append("  - {index: ").append(g).append(", name: ").append(yamlQuoted(NAMES[g])).append(", uuid: ")
                    .append(yamlQuoted(UUIDS[g])).append(", pci_bus_id: \"00000000:1").append(g)
                    .append(":00.0\"}\n");
        }
        Path node = Files.writeString(dir.resolve("node.yaml"), yaml.toString());
        SimulatedGpuInventory inv = GpuInventories.simulated(node.toString());
        for (int g = 0; g < NAMES.length; g++) { // the inventory holds the strings as written (the YAML is right)
            assertThat(inv.devices().get(g).name()).isEqualTo(NAMES[g]);
            assertThat(inv.devices().get(g).uuid()).isEqualTo(UUIDS[g]);
        }
        try (GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false).build()) {
            // the console's own /metrics (its host name is the machine's)
            Path state = Files.createDirectories(dir.resolve("state"));
            String served;
            try (ConsoleServer c = ConsoleServer.builder().scheduler(s).inventory(inv).stateDir(state)
                    .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).build().start()) {
                HttpResponse<String> r = HttpClient.newHttpClient().send(HttpRequest.newBuilder(
                        URI.create(c.url() + "/metrics")).build(), HttpResponse.BodyHandlers.ofString());
                assertThat(r.statusCode()).isEqualTo(200);
                served = r.body();
            }
            checkDcgm(served, null);
            // the public binder on a host's own registry, with a hostile host name as well
            PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
            registry.config().namingConvention(DcgmMeterBinder.namingConvention());
            new DcgmMeterBinder(s::devices, HOST).bindTo(registry);
            String scraped = registry.scrape();
            checkDcgm(scraped, HOST);
            registry.close();
            // our parser's checks above ran whatever is installed; promtool's verdict is added where it is present
            promtool(served);
            promtool(scraped);
        }
    }

    private static void checkDcgm(String text, String host) {
        List<Sample> samples = parse(text);
        Set<String> names = new TreeSet<>();
        Set<String> uuids = new TreeSet<>();
        int dcgm = 0;
        for (Sample x : samples) {
            if (!x.name().startsWith("DCGM_FI_DEV_")) {
                continue;
            }
            dcgm++;
            int g = Integer.parseInt(x.labels().get("gpu"));
            assertThat(x.labels().get("modelName")).isEqualTo(NAMES[g]);
            assertThat(x.labels().get("UUID")).isEqualTo(UUIDS[g]);
            names.add(x.labels().get("modelName"));
            uuids.add(x.labels().get("UUID"));
            if (host != null) {
                assertThat(x.labels().get("Hostname")).isEqualTo(host);
            }
        }
        assertThat(dcgm).isEqualTo(6 * NAMES.length);
        assertThat(names).containsExactlyInAnyOrder(NAMES);
        assertThat(uuids).containsExactlyInAnyOrder(UUIDS);
    }

    @Test
    void theParserHereRefusesWhatTheFormatForbids() {
        assertThat(parse("a{b=\"x\\\\y\\\"z\\n\"} 1\n").get(0).labels().get("b")).isEqualTo("x\\y\"z\n");
        for (String bad : List.of("a{b=\"x\ny\"} 1\n", "a{b=\"x\\ty\"} 1\n", "a{b=\"x\",b=\"y\"} 1\n", "a{b=x} 1\n",
                "a{b=\"x\"}1\n", "a 1x\n")) {
            try {
                parse(bad);
                throw new AssertionError("accepted " + bad);
            } catch (IllegalStateException | NumberFormatException | StringIndexOutOfBoundsException expected) {
                // refused
            }
        }
    }

    @Test
    void ledgerForceCountEqualsTheForcesTheTestCaused(@TempDir Path dir) throws Exception {
        SimulatedGpuInventory inv = GpuInventories.simulated("pcie-4xa10");
        PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
        try (GpuScheduler s = GpuScheduler.builder().inventory(inv).stateDir(dir).auditLogging(false).build()) {
            new SchedulerMeterBinder(s).bindTo(registry);
            Path ledger = s.ledgerStatistics().orElseThrow().file();
            double before = value(registry.scrape(), "gpusched_ledger_force_seconds_count");
            long sizeBefore = Files.size(ledger);
            int n = 12; // 3 of them stay held (4 GPUs)
            for (int i = 0; i < n; i++) {
                String id = s.allocate(GpuRequests.fromCliFlags("--gpu=1", "--owner=t" + i)).id();
                if (i % 4 != 3) {
                    s.release(id);
                }
            }
            int changes = n + n * 3 / 4; // each allocate and each release is one forced append of the ledger
            String text = registry.scrape();
            assertThat(value(text, "gpusched_ledger_force_seconds_count") - before).isEqualTo(changes);
            double sum = value(text, "gpusched_ledger_force_seconds_sum");
            double max = value(text, "gpusched_ledger_force_max_seconds");
            assertThat(sum).isPositive();
            assertThat(max).isPositive().isLessThanOrEqualTo(sum);
            assertThat(Files.size(ledger)).as("the ledger file grew").isGreaterThan(sizeBefore);
            assertThat(text).contains("# TYPE gpusched_ledger_force_seconds summary");
        }
    }

    @Test
    void noLedgerNoLedgerMeters() throws Exception {
        SimulatedGpuInventory inv = GpuInventories.simulated("pcie-4xa10");
        PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
        try (GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false).build()) {
            new SchedulerMeterBinder(s).bindTo(registry);
            assertThat(registry.scrape()).doesNotContain("gpusched_ledger_force");
        }
    }

    static double value(String text, String name) {
        for (Sample x : parse(text)) {
            if (x.name().equals(name)) {
                return Double.parseDouble(x.value().split(" ")[0]);
            }
        }
        throw new AssertionError(name + " not in the scrape:\n" + text);
    }
}
