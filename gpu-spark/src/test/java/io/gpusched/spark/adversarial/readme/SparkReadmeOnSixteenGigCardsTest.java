package io.gpusched.spark.adversarial.readme;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusched.spark.GpuschedDiscoveryPlugin;
import io.gpusched.spark.GpuschedSparkPlugin;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Optional;
import org.apache.spark.SparkConf;
import org.apache.spark.resource.ResourceID;
import org.apache.spark.resource.ResourceInformation;
import org.apache.spark.resource.ResourceRequest;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * README's Spark-on-YARN/Kubernetes block, pasted whole (its "optional, with defaults" lines included), on
 * a node of 16 GB cards. Real cards report less than their nominal size (this repository's nvidia-smi captures: a
 * "32GB" V100S reports 32510 MiB, a "24GB" RTX A5000 24564 MiB; a V100-SXM2-16GB reports 16160 MiB), while
 * {@code 16g} is 16384 MiB. The block is read with Spark's own properties loader; the node is a node description
 * whose GPUs report 16160 MiB.
 */
@Tag("adversarial")
class SparkReadmeOnSixteenGigCardsTest {

    @TempDir
    Path tmp;

    @Test
    void readmeExecutorBlockAsPastedServesANodeOfSixteenGigCards() throws Exception {
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

        String readme = Files.readString(Path.of("..", "README.md"), StandardCharsets.UTF_8);
        int sec = readme.indexOf("**Spark on YARN and on Kubernetes**");
        assertTrue(sec >= 0, "README's Spark on YARN/Kubernetes part");
        int start = readme.indexOf("```\n", sec) + 4;
        String block = readme.substring(start, readme.indexOf("```", start));
        assertTrue(block.contains("spark.gpusched.memoryPerGpu"), block);
        String pasted = block.replace("/var/lib/gpusched", state.toString())
                .replaceAll("(?m)^(spark\\.gpusched\\.inventory\\s+)auto", "$1simulated:" + nodeFile);
        Path file = tmp.resolve("spark-defaults.conf");
        Files.writeString(file, pasted);
        scala.collection.Map<String, String> props = org.apache.spark.util.Utils.getPropertiesFromFile(file.toString());
        SparkConf conf = new SparkConf(false);
        scala.collection.Iterator<scala.Tuple2<String, String>> it = props.iterator();
        while (it.hasNext()) {
            scala.Tuple2<String, String> kv = it.next();
            conf.set(kv._1(), kv._2());
        }
        long amount = Long.parseLong(conf.get("spark.executor.resource.gpu.amount"));
        try {
            ResourceInformation ri = new GpuschedDiscoveryPlugin().discoverResource(new ResourceRequest(
                    new ResourceID("spark.executor", "gpu"), amount, Optional.empty(), Optional.empty()), conf)
                    .orElseThrow();
            assertEquals(amount, ri.addresses().length);
        } finally {
            new GpuschedSparkPlugin().executorPlugin().shutdown();
        }
    }
}
