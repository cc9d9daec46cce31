package io.gpusched.cli.adversarial.review16;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.cli.GpuschedCommand;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review16: {@code gpusched selftest}'s {@code kubernetes} check on a node whose GPUs are in MIG mode (every GPU
 * partitioned, as on the A100/H100 nodes that Kubernetes shares by MIG profile). The device plug-in advertises each
 * MIG profile as its own resource ({@code nvidia.com/mig-3g.40gb}, ..., DevicePluginConfig's default MIXED strategy,
 * ResourcePlan), so it can run and be checked here. The check said SKIPPED ("the node has no whole NVIDIA or AMD GPU
 * for the plug-in to advertise": it kept only {@code !d.isPartition()} devices) and the self-test exited 0 without
 * the plug-in having been started. The issue: "exit 0 only when every check that could run passed".
 */
@Tag("adversarial")
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class SelftestOnAMigNodeTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path dir;

    @Test
    void theKubernetesCheckRunsOnANodeWhoseGpusAreMigPartitioned() throws Exception {
        // one H100 in MIG mode, as the repository's capture gpu-slurm/src/test/resources/captures/h100-mig.yaml
        StringBuilder y = new StringBuilder("node: review16-h100-mig\n"
                + "driver_version: \"590.48.01\"\n"
                + "defaults: {vendor: NVIDIA, compute_capability: \"9.0\"}\n"
                + "devices:\n");
        String[][] parts = {{"3g.40gb", "40448MiB", "2"}, {"2g.20gb", "20096MiB", "3"}, {"1g.10gb", "9984MiB", "9"},
            {"1g.10gb", "9984MiB", "10"}};
        for (int i = 0; i < parts.length; i++) {
            y.append(String.format("  - {index: %d, uuid: MIG-0000000%d-0000-0000-0000-00000000000%d,"
                    + " name: NVIDIA H100 80GB HBM3 MIG %s, memory: %s, pci_bus_id: \"00000000:00:09.0\","
                    + " numa_node: 0, minor: 0, parent: GPU-00000000-0000-0000-0000-000000000000,"
                    + " properties: {nvml.index: \"0\", mig.gpu_instance_id: \"%s\", mig.compute_instance_id:"
                    + " \"0\"}}%n", i, i, i, parts[i][0], parts[i][1], parts[i][2]));
        }
        Path node = Files.writeString(dir.resolve("h100-mig.yaml"), y);

        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        Map<String, String> env = new HashMap<>(System.getenv());
        env.remove("GPUSCHED_SOCKET");
        int exit = GpuschedCommand.commandLine(new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8), env).execute("--simulate", node.toString(),
                        "--state-dir", dir.resolve("state").toString(), "--json", "selftest");
        String text = out.toString(StandardCharsets.UTF_8);
        JsonNode report = JSON.readTree(text);
        JsonNode kubernetes = null;
        for (JsonNode c : report.get("checks")) {
            if (c.get("name").asText().equals("kubernetes")) {
                kubernetes = c;
            }
        }
        assertThat(kubernetes).as("the kubernetes check in " + text).isNotNull();
        assertThat(kubernetes.get("verdict").asText()).as("the kubernetes check on a MIG node (self-test exit %d): %s",
                exit, kubernetes).isEqualTo("PASS");
    }
}
