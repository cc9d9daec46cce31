package io.gpusched.flink.adversarial.readme;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusched.flink.GpuschedDriverFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Set;
import org.apache.flink.api.common.externalresource.ExternalResourceInfo;
import org.apache.flink.configuration.Configuration;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * README's Flink {@code config.yaml} block, pasted whole (its "optional, with defaults" lines included),
 * read by Flink's {@code GlobalConfiguration}, on a node of 16 GB cards: real cards report less than their nominal
 * size (a V100-SXM2-16GB reports 16160 MiB; this repository's captures: "32GB" V100S 32510 MiB, "24GB" A5000
 * 24564 MiB) while {@code memory-per-gpu: 16GB} is 16384 MiB.
 */
@Tag("adversarial")
class FlinkReadmeOnSixteenGigCardsTest {

    @TempDir
    Path tmp;

    @Test
    void readmeBlockAsPastedServesANodeOfSixteenGigCards() throws Exception {
        Path state = Files.createDirectories(tmp.resolve("state"));
        Files.setPosixFilePermissions(state, PosixFilePermissions.fromString("rwx------"));
        StringBuilder node = new StringBuilder("node: v100-16gb-node\n"
                + "defaults: {vendor: NVIDIA, name: Tesla V100-SXM2-16GB, memory: 16160MiB, compute_capability: \"7.0\"}\n"
                + "devices:\n");
        for (int i = 0; i < 8; i++) {
            node.append("  - {index: ").append(i).append(", pci_bus_id: \"00000000:0").append(i + 1)
                    .append(":00.0\"}\n");
        }
        Path nodeFile = tmp.resolve("v100-16gb.yaml");
        Files.writeString(nodeFile, node);
        String text = Files.readString(Path.of("..", "README.md"));
        int sec = text.indexOf("### Flink (`gpu-flink`)");
        assertTrue(sec >= 0, "README has a Flink section");
        int start = text.indexOf("```yaml\n", sec) + 8;
        String block = text.substring(start, text.indexOf("```", start));
        assertTrue(block.contains("memory-per-gpu"), block);
        String pasted = block.replace("/var/lib/gpusched", state.toString())
                .replaceAll("(?m)^(external-resource\\.gpu\\.param\\.inventory:\\s*)auto", "$1simulated:" + nodeFile);
        Path dir = Files.createDirectories(tmp.resolve("conf"));
        Files.writeString(dir.resolve("config.yaml"), pasted);
        Configuration all = org.apache.flink.configuration.GlobalConfiguration.loadConfiguration(dir.toString());
        Configuration params = new Configuration();
        String prefix = "external-resource.gpu.param.";
        all.toMap().forEach((k, v) -> {
            if (k.startsWith(prefix)) {
                params.setString(k.substring(prefix.length()), v);
            }
        });
        long amount = Long.parseLong(all.toMap().get("external-resource.gpu.amount"));
        Set<? extends ExternalResourceInfo> infos = new GpuschedDriverFactory().createExternalResourceDriver(params)
                .retrieveResourceInfo(amount);
        assertEquals(amount, infos.size());
    }
}
