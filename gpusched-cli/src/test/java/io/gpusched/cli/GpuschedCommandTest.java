package io.gpusched.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.cli.WatchView;
import io.gpusched.core.AllocationStrategies;
import io.gpusched.core.DeviceView;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.SimulatedGpuInventory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.xml.parsers.DocumentBuilderFactory;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.w3c.dom.Element;
import org.w3c.dom.Node;

class GpuschedCommandTest {
    @TempDir
    Path dir;
    CliRunner cli;

    @BeforeEach
    void setUp() {
        cli = new CliRunner(dir.resolve("state"));
    }

    /**
     * {@code gpusched --version} is the project's version as the root pom.xml says it (read here with the JDK's XML
     * parser, not through the build), so a literal left in the code fails at the next version bump.
     */
    @Test
    void versionIsTheProjectVersionFromThePom() throws Exception {
        Path pom = Path.of("..", "pom.xml").toAbsolutePath().normalize();
        assertThat(pom).isRegularFile();
        DocumentBuilderFactory f = DocumentBuilderFactory.newInstance();
        f.setFeature("http://apache.org/xml/features/disallow-doctype-decl", true);
        Element project = f.newDocumentBuilder().parse(pom.toFile()).getDocumentElement();
        String version = null;
        for (Node n = project.getFirstChild(); n != null; n = n.getNextSibling()) {
            if (n instanceof Element e && e.getTagName().equals("version")) {
                version = e.getTextContent().trim();
            }
        }
        assertThat(version).as("the root pom's <version>").isNotBlank();
        CliRunner.Result r = cli.run("--version");
        assertThat(r.exit()).isZero();
        assertThat(r.out().strip()).isEqualTo("gpusched " + version);
    }

    @Test
    void listShowsEveryGpuAndJson() throws Exception {
        CliRunner.Result r = cli.run("--simulate", "dgx1-v100", "list");
        assertThat(r.exit()).isZero();
        assertThat(r.out()).contains("Backend simulated:dgx1-v100, 8 GPUs").contains("Tesla V100-SXM2-32GB")
                .contains("0 B / 32 GiB").contains("HEALTHY");
        assertThat(r.out().lines().filter(l -> l.matches("^[0-7] .*"))).hasSize(8);
        JsonNode json = new ObjectMapper().readTree(cli.run("--simulate", "dgx1-v100", "list", "--json").out());
        assertThat(json).hasSize(8);
        assertThat(json.get(0).get("health").asText()).isEqualTo("HEALTHY");
    }

    /** Each command taking --strategy names, in its help, every strategy the library accepts. */
    @Test
    void strategyHelpNamesEveryStrategy() {
        for (String command : List.of("allocate", "run", "plan")) {
            CliRunner.Result r = cli.run(command, "--help");
            assertThat(r.exit()).as(command + " --help").isZero();
            String option = "--strategy=<strategy>";
            int at = r.out().lastIndexOf(option); // the option's entry, after the usage synopsis
            assertThat(at).as(command + " --help lists --strategy").isPositive();
            StringBuilder description = new StringBuilder();
            for (String l : r.out().substring(at + option.length()).split("\n", -1)) {
                if (description.length() > 0 && l.trim().startsWith("-")) {
                    break; // the next option
                }
                description.append(' ').append(l.trim());
            }
            String line = description.toString();
            for (String name : AllocationStrategies.names()) {
                assertThat(line).as(command + " --help: " + line).containsPattern("(^|[ ,])" + Pattern.quote(name)
                        + "([ ,]|$)");
            }
        }
    }

    @Test
    void topoPrintsTheLinkMatrix() {
        CliRunner.Result r = cli.run("--simulate", "dgx1-v100", "topo");
        assertThat(r.exit()).isZero();
        assertThat(r.out()).contains("GPU0  X     NV1   NV1   NV2   NV2   SYS   SYS   SYS   0").contains("Legend");
        assertThat(new CliRunner(dir.resolve("amd")).run("--simulate", "mi210-8x", "topo").out()).contains("XG1");
    }

    @Test
    void oneStateDirectoryServesOneNode() {
        assertThat(cli.run("--simulate", "dgx1-v100", "status").exit()).isZero();
        CliRunner.Result other = cli.run("--simulate", "mi210-8x", "status");
        assertThat(other.exit()).isNotZero();
        assertThat(other.err()).contains("another node").contains(dir.resolve("state").toString());
    }

    @Test
    void allocationsPersistAcrossInvocationsUntilReleased() {
        CliRunner.Result a = cli.run("--simulate", "dgx1-v100", "allocate", "--gpu=2", "--gpu-memory=8GB",
                "--owner=alice", "--strategy", "topology");
        assertThat(a.exit()).as(a.err()).isZero();
        Matcher m = Pattern.compile("allocated (\\S+): GPUs \\[(\\d+), (\\d+)]").matcher(a.out());
        assertThat(m.find()).as(a.out()).isTrue();
        String id = m.group(1);
        assertThat(a.out()).contains("CUDA_VISIBLE_DEVICES=GPU-").contains("CUDA_DEVICE_ORDER=PCI_BUS_ID")
                .containsPattern("release with: gpusched --simulate dgx1-v100 --state-dir \\S+ release " + id);
        CliRunner.Result st = cli.run("--simulate", "dgx1-v100", "status");
        assertThat(st.out()).contains(id + "  GPUs [").contains("owner alice").contains("1 allocations");
        CliRunner.Result shared = cli.run("--simulate", "dgx1-v100", "allocate", "--shared=4GB", "--lease=2h",
                "--json");
        assertThat(shared.out()).contains("\"sharing\" : \"SHARED\"").contains("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT");
        assertThat(cli.run("--simulate", "dgx1-v100", "status", "--json").out()).contains("\"expiresAt\"");
        assertThat(cli.run("--simulate", "dgx1-v100", "release", id).out()).contains("released " + id);
        CliRunner.Result again = cli.run("--simulate", "dgx1-v100", "release", id);
        assertThat(again.exit()).isZero();
        assertThat(again.out()).contains(id + " was already released");
        assertThat(cli.run("--simulate", "dgx1-v100", "status").out()).doesNotContain(id + "  GPUs");
    }

    @Test
    void errorsAreOneLineAndNonZero() {
        CliRunner.Result big = cli.run("--simulate", "dgx1-v100", "allocate", "--gpu=99");
        assertThat(big.exit()).isEqualTo(2);
        assertThat(big.err().strip())
                .startsWith("gpusched: NODE_TOO_SMALL: 99 GPUs requested; this node has 8 GPUs in all")
                .doesNotContain("\n");
        CliRunner.Result unknown = cli.run("--simulate", "dgx1-v100", "release", "nope-1");
        assertThat(unknown.exit()).isEqualTo(2);
        assertThat(unknown.err().strip()).startsWith("gpusched: UNKNOWN_ALLOCATION: no allocation \"nope-1\"")
                .doesNotContain("\tat ");
        CliRunner.Result verbose = cli.run("--simulate", "dgx1-v100", "--verbose", "release", "nope-1");
        assertThat(verbose.err()).contains("\tat ");
        CliRunner.Result badFlag = cli.run("--simulate", "dgx1-v100", "allocate", "--gpu-memory=lots");
        assertThat(badFlag.exit()).isEqualTo(2);
        assertThat(badFlag.err()).contains("invalid memory size \"lots\"");
        assertThat(cli.run("--simulate", "nope", "list").err()).contains("unknown simulated profile \"nope\"");
        assertThat(cli.run("bogus").exit()).isEqualTo(2);
        CliRunner.Result detected = cli.run("list");
        if (HostGpus.anyProviderAvailable()) {
            assertThat(detected.exit()).as(detected.err()).isZero();
            assertThat(detected.out()).startsWith("Backend ");
        } else {
            assertThat(detected.exit()).isEqualTo(4);
            assertThat(detected.err()).contains("no GPU backend is available here").contains("--simulate dgx1-v100");
        }
    }

    @Test
    void watchDrawsFramesWithoutScrollingAndHighlightsHealthChanges() {
        CliRunner.Result r = cli.run("--simulate", "pcie-4xa10", "watch", "--count", "2", "--interval", "10ms",
                "--no-ansi");
        assertThat(r.exit()).isZero();
        assertThat(r.out().split("gpusched watch - simulated:pcie-4xa10", -1)).hasSize(3);
        SimulatedGpuInventory inv = GpuInventories.simulated("pcie-4xa10");
        GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false).build();
        inv.setMetrics(1, 50, io.gpusched.core.MemorySize.ofGibibytes(4), 61, 120);
        s.updateMetrics(inv.sample());
        inv.setHealth(2, GpuHealth.unhealthy("XID 79"));
        List<DeviceView> devices = DeviceView.of(s.devices(), s.allocations(), Instant.now());
        String frame = WatchView.render("t", devices, Map.of(2, "HEALTHY"), true);
        assertThat(frame).startsWith(WatchView.HOME_AND_CLEAR).contains("[##########..........]")
                .contains("\u001b[7m2 ").contains("UNHEALTHY (XID 79)").contains("4 GiB / 24 GiB");
        assertThat(WatchView.render("t", devices, Map.of(), false)).doesNotContain("\u001b");
    }

    @Test
    void doctorReportsProvidersIsolationAndCuda() {
        CliRunner.Result r = cli.run("doctor");
        assertThat(r.exit()).isZero();
        assertThat(r.out()).contains("Inventory providers").contains("nvml (priority 100)").contains("Isolation:")
                .contains("CUDA (driver");
        if (Files.isDirectory(Path.of("/usr/local/cuda-13.0"))) {
            assertThat(r.out()).contains("/usr/local/cuda-13.0").contains("CUDA 13.0");
        }
    }

    @Test
    void planShowsWhatEachJobWouldGetInDependencyOrder() throws Exception {
        Path wf = Files.writeString(dir.resolve("workflow.yaml"), """
                jobs:
                  fetch-data: {resources: {cpu: 4}}
                  train-a:    {needs: [fetch-data], resources: {gpu_count: 4, gpu_memory_mb: 16384}}
                  train-b:    {needs: [fetch-data], resources: {gpu_count: 2}}
                  evaluate:   {needs: [train-a, train-b], resources: {gpu_count: 1}}
                """);
        CliRunner.Result r = cli.run("--simulate", "dgx1-v100", "plan", wf.toString());
        assertThat(r.exit()).as(r.err()).isZero();
        List<String> lines = r.out().lines().toList();
        assertThat(lines.get(1)).startsWith("0      fetch-data  no GPU");
        assertThat(lines.get(2)).contains("train-a").contains("4 GPUs (>= 16 GiB)").contains("GPUs [");
        assertThat(lines.get(4)).startsWith("2      evaluate");
        Files.writeString(wf, "jobs:\n  a: {needs: [b]}\n  b: {needs: [a]}\n");
        CliRunner.Result cycle = cli.run("--simulate", "dgx1-v100", "plan", wf.toString());
        assertThat(cycle.exit()).isEqualTo(2);
        assertThat(cycle.err()).contains("dependency cycle among [a, b]");
        Files.writeString(wf, "jobs:\n  a: {needs: [zz], resources: {gpu_count: 1}}\n");
        assertThat(cli.run("--simulate", "dgx1-v100", "plan", wf.toString()).err()).contains("unknown job \"zz\"");
    }

    @Test
    void demoCommandRuns() {
        CliRunner.Result r = cli.run("--simulate", "dgx-h100", "demo");
        assertThat(r.exit()).isZero();
        assertThat(r.out()).contains("Released; 0 allocations left");
    }
}
