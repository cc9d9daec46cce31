package io.gpusched.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.cli.Selftest.Check;
import io.gpusched.cli.Selftest.Verdict;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.MemorySize;
import io.gpusched.core.sim.SimulatedGpuInventory;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code gpusched selftest} on a simulated node (every check runs, passes, and says it was simulated), and each
 * check's failure path: a backend that disagrees, an unhealthy GPU, a fence the kernel does not apply, a console port
 * in use. The fence checks need root and cgroups (CI has both) and are skipped otherwise, saying so.
 */
class SelftestCommandTest {
    @TempDir
    Path tmp;

    private static boolean root() throws Exception {
        return Files.readAllLines(Path.of("/proc/self/status")).stream().filter(l -> l.startsWith("Uid:"))
                .anyMatch(l -> l.split("\\s+")[2].equals("0"));
    }

    private static Map<String, JsonNode> checks(JsonNode report) {
        Map<String, JsonNode> m = new LinkedHashMap<>();
        report.get("checks").forEach(c -> m.put(c.get("name").asText(), c));
        return m;
    }

    /** The self-test's cgroups under every hierarchy (v2 alone, hybrid {@code unified/}, v1 {@code devices/}). */
    private static List<Path> selftestCgroups() throws Exception {
        Path root = Path.of("/sys/fs/cgroup");
        if (!Files.isDirectory(root)) {
            return List.of();
        }
        try (Stream<Path> s = Files.walk(root, 2)) {
            return s.filter(p -> p.getFileName() != null
                    && p.getFileName().toString().startsWith("gpusched-selftest-")).sorted().toList();
        }
    }

    @Test
    void onASimulatedNodeEveryCheckRunsPassesAndSaysItWasSimulated() throws Exception {
        List<Path> before = selftestCgroups();
        CliRunner.Result r = new CliRunner(tmp.resolve("state")).run("--simulate", "dgx1-v100", "selftest",
                "--json");
        assertThat(r.exit()).as(r.out() + r.err()).isZero();
        JsonNode report = new ObjectMapper().readTree(r.out());
        assertThat(report.get("simulated").asBoolean()).isTrue();
        assertThat(report.get("passed").asBoolean()).isTrue();
        assertThat(report.get("node").asText()).contains("simulated");
        Map<String, JsonNode> c = checks(report);
        assertThat(c.keySet()).containsExactly("discovery", "health", "fence", "console", "cuda", "cuda-query",
                "kubernetes", "service");
        assertThat(c.get("cuda").get("verdict").asText()).as(c.get("cuda").toString()).isEqualTo("PASS");
        assertThat(c.get("cuda").get("detail").asText()).contains("CUDA_VISIBLE_DEVICES=");
        assertThat(c.get("cuda-query").get("verdict").asText()).isEqualTo("SKIPPED");
        assertThat(c.get("cuda-query").get("cause").asText()).contains("simulated");
        assertThat(c.get("kubernetes").get("verdict").asText()).as(c.get("kubernetes").toString()).isEqualTo("PASS");
        assertThat(c.get("kubernetes").get("detail").asText()).contains("nvidia.com/gpu").contains("/dev/nvidiactl");
        assertThat(c.get("discovery").get("verdict").asText()).isEqualTo("PASS");
        assertThat(c.get("discovery").get("detail").asText()).contains("8 GPUs").contains("simulated");
        assertThat(c.get("health").get("verdict").asText()).isEqualTo("PASS");
        assertThat(c.get("console").get("verdict").asText()).isEqualTo("PASS");
        assertThat(c.get("console").get("detail").asText()).contains("8 GPUs");
        if (root()) {
            assertThat(c.get("fence").get("verdict").asText()).as(c.get("fence").toString()).isIn("PASS", "SKIPPED");
            if (c.get("fence").get("verdict").asText().equals("PASS")) {
                assertThat(c.get("fence").get("detail").asText()).contains("its GPU's node: ENXIO")
                        .contains("another GPU's: EPERM");
            }
        } else {
            assertThat(c.get("fence").get("verdict").asText()).isEqualTo("SKIPPED");
            assertThat(c.get("fence").get("cause").asText()).contains("root");
        }
        assertThat(selftestCgroups()).as("the self-test's cgroups are removed").isEqualTo(before);

        CliRunner.Result text = new CliRunner(tmp.resolve("state")).run("--simulate", "dgx1-v100", "selftest");
        assertThat(text.exit()).as(text.out() + text.err()).isZero();
        assertThat(text.out()).contains("(simulated: this host's GPUs were not used)").contains("[pass] discovery")
                .contains("[pass] console").contains("All checks that could run passed.");
        assertThat(tmp.resolve("state")).as("the self-test writes no ledger").doesNotExist();
    }

    @Test
    void aBackendThatDisagreesFailsNamingEachDifference() {
        List<GpuDevice> nvml = GpuInventories.simulated("dgx1-v100").devices();
        List<GpuDevice> procfs = new ArrayList<>();
        for (GpuDevice d : nvml) {
            if (d.index() == 7) {
                continue; // a GPU the second backend does not see
            }
            GpuDevice.Builder b = GpuDevice.builder().index(d.index()).uuid(d.uuid()).vendor(d.vendor()).name(d.name())
                    .memory(d.index() == 2 ? MemorySize.ofGibibytes(8) : d.memory()).pciBusId(d.index() == 3
                            ? "00000000:FF:00.0" : d.pciBusId())
                    .minor(d.index() == 4 ? 40 : d.minor().getAsInt());
            procfs.add(b.build());
        }
        Map<String, List<GpuDevice>> by = new LinkedHashMap<>();
        by.put("nvml", nvml);
        by.put("procfs", procfs);
        Check c = Selftest.discovery(by, false);
        assertThat(c.verdict()).isEqualTo(Verdict.FAIL);
        assertThat(c.cause()).contains("memory " + nvml.get(2).memory().toHumanString() + " vs "
                + MemorySize.ofGibibytes(8).toHumanString()).contains(nvml.get(2).uuid())
                .contains("PCI bus id").contains("00000000:FF:00.0").contains("minor 4 vs 40")
                .contains("procfs does not see " + nvml.get(7).uuid());
        assertThat(c.remedy()).isNotBlank();
        Map<String, List<GpuDevice>> same = new LinkedHashMap<>();
        same.put("nvml", nvml);
        same.put("procfs", nvml);
        assertThat(Selftest.discovery(same, false).verdict()).isEqualTo(Verdict.PASS);
    }

    @Test
    void aServiceThatIsNotThereIsSkippedAndASocketThatIsNotOneFails() throws Exception {
        Check none = Selftest.service(tmp.resolve("no.sock"));
        assertThat(none.verdict()).isEqualTo(Verdict.SKIPPED);
        assertThat(none.cause()).contains(tmp.resolve("no.sock").toString());
        Path file = Files.writeString(tmp.resolve("file.sock"), "");
        Check bad = Selftest.service(file);
        assertThat(bad.verdict()).as(bad.toString()).isEqualTo(Verdict.FAIL);
        assertThat(bad.cause()).contains(file.toString());
        assertThat(bad.remedy()).contains("systemctl status gpusched");
    }

    @Test
    void anUnhealthyGpuFailsTheHealthCheck() {
        SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100");
        inv.setHealth(5, GpuHealth.unhealthy("XID 79"));
        Check c = Selftest.health(inv);
        assertThat(c.verdict()).isEqualTo(Verdict.FAIL);
        assertThat(c.cause()).contains("GPU 5").contains("XID 79");
        assertThat(c.remedy()).isNotBlank();
    }

    @Test
    void aConsolePortInUseFailsTheConsoleCheckAndTheCommand() throws Exception {
        try (ServerSocket busy = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            CliRunner.Result r = new CliRunner(tmp.resolve("state")).run("--simulate", "dgx1-v100", "selftest",
                    "--console-port", String.valueOf(busy.getLocalPort()), "--json");
            assertThat(r.exit()).as(r.out() + r.err()).isEqualTo(1);
            JsonNode report = new ObjectMapper().readTree(r.out());
            assertThat(report.get("passed").asBoolean()).isFalse();
            JsonNode console = checks(report).get("console");
            assertThat(console.get("verdict").asText()).isEqualTo("FAIL");
            assertThat(console.get("remedy").asText()).contains("port " + busy.getLocalPort())
                    .contains("--console-port");
            assertThat(checks(report).get("discovery").get("verdict").asText()).isEqualTo("PASS");
        }
    }

    @Test
    void aFenceTheKernelDoesNotApplyFailsAndTheRealOnePasses() throws Exception {
        assumeTrue(root(), "skipped: the fence check needs root to make device nodes and a cgroup");
        List<Path> before = selftestCgroups();
        Check real = Selftest.fence(tmp.resolve("real"), Selftest.REAL_FENCE);
        assumeTrue(real.verdict() != Verdict.SKIPPED, () -> "skipped: " + real.cause());
        assertThat(real.verdict()).as(real.toString()).isEqualTo(Verdict.PASS);
        Check none = Selftest.fence(tmp.resolve("none"), (iso, cgroup, allocation) -> () -> {});
        assertThat(none.verdict()).as(none.toString()).isEqualTo(Verdict.FAIL);
        assertThat(none.detail()).contains("another GPU's: ENXIO");
        assertThat(none.cause()).contains("did not apply the fence");
        assertThat(none.remedy()).contains("gpusched doctor");
        assertThat(selftestCgroups()).as("the self-test's cgroups are removed").isEqualTo(before);
    }
}
