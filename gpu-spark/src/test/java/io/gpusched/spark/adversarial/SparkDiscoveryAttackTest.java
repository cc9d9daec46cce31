package io.gpusched.spark.adversarial;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.host.ProcessGpus;
import io.gpusched.spark.GpuschedDiscoveryPlugin;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.stream.Collectors;
import org.apache.spark.SparkConf;
import org.apache.spark.resource.ResourceID;
import org.apache.spark.resource.ResourceInformation;
import org.apache.spark.resource.ResourceRequest;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Adversarial checks of the Spark discovery plugin through its public entry point: the README's lines as Spark's own
 * properties loader reads them, silly amounts, state directories that are unsafe or unusable, and asking twice from
 * one JVM. The node ledger is inspected with an independent scheduler on the same state directory.
 */
@Tag("adversarial")
class SparkDiscoveryAttackTest {

    @TempDir
    Path tmp;

    private Path state() throws Exception {
        Path s = tmp.resolve("state");
        Files.createDirectories(s);
        Files.setPosixFilePermissions(s, PosixFilePermissions.fromString("rwx------"));
        return s;
    }

    private static SparkConf conf(Path state) {
        return new SparkConf(false).set("spark.gpusched.stateDir", state.toString())
                .set("spark.gpusched.inventory", "simulated:dgx1-v100");
    }

    private static ResourceRequest req(String component, long amount) {
        return new ResourceRequest(new ResourceID(component, "gpu"), amount, Optional.empty(), Optional.empty());
    }

    private static int held(Path state) {
        try (GpuInventory inv = GpuInventories.simulated("dgx1-v100");
             GpuScheduler s = GpuScheduler.builder().inventory(inv).stateDir(state).build()) {
            s.refresh();
            return s.allocations().stream().mapToInt(a -> a.devices().size()).sum();
        }
    }

    private static String chain(Throwable t) {
        StringBuilder b = new StringBuilder();
        for (Throwable c = t; c != null; c = c.getCause()) {
            b.append(c).append(" | ");
        }
        return b.toString();
    }

    /**
     * The spark-defaults.conf blocks of README's Spark section that set the discovery plugin (standalone: the
     * Worker's; YARN/Kubernetes: the executor's), each read by Spark's own loader, then discovered by the component
     * the block names ({@code spark.worker} or {@code spark.executor}), which gets as many GPUs as the block asks.
     */
    @Test
    void readmeSparkDefaultsLinesWorkAsPasted() throws Exception {
        Path readme = Paths.get("..", "README.md");
        String text = Files.readString(readme, StandardCharsets.UTF_8);
        int sec = text.indexOf("### Spark (`gpu-spark`)");
        assertTrue(sec >= 0, "README has a Spark section");
        int secEnd = text.indexOf("\n### ", sec + 1);
        int blocks = 0;
        for (int start = text.indexOf("```\n", sec); start >= 0 && start < secEnd; start =
                text.indexOf("```\n", text.indexOf("```", start + 4) + 3)) {
            int end = text.indexOf("```", start + 4);
            String block = text.substring(start + 4, end);
            if (!block.contains("spark.resources.discoveryPlugin")) {
                continue;
            }
            String component = block.contains("spark.worker.resource.gpu.amount") ? "spark.worker" : "spark.executor";
            Path state = Files.createDirectories(state().resolve(component));
            // the lines a user pastes; the state dir and the inventory point at this test's node
            String pasted = block.replace("/var/lib/gpusched", state.toString())
                    .replaceAll("(?m)^(spark\\.gpusched\\.inventory\\s+)auto", "$1simulated:dgx1-v100");
            if (!pasted.contains("spark.gpusched.inventory")) {
                pasted += "spark.gpusched.inventory simulated:dgx1-v100\n";
            }
            Path file = tmp.resolve(component + "-spark-defaults.conf");
            Files.writeString(file, pasted);
            scala.collection.Map<String, String> props = org.apache.spark.util.Utils.getPropertiesFromFile(
                    file.toString());
            SparkConf conf = new SparkConf(false);
            scala.collection.Iterator<scala.Tuple2<String, String>> it = props.iterator();
            while (it.hasNext()) {
                scala.Tuple2<String, String> kv = it.next();
                conf.set(kv._1(), kv._2());
            }
            long amount = Long.parseLong(conf.get(component + ".resource.gpu.amount"));
            ResourceInformation ri = new GpuschedDiscoveryPlugin().discoverResource(req(component, amount), conf)
                    .orElseThrow();
            assertEquals(amount, ri.addresses().length, String.join(",", ri.addresses()));
            assertEquals(amount, held(state), "the ledger holds what the " + component + " got");
            blocks++;
        }
        assertEquals(2, blocks, "README has a standalone Worker block and a YARN/Kubernetes executor block");
    }

    @Test
    void hugeAmountFailsWithGpuschedsReasonAndHoldsNothing() throws Exception {
        Path state = state();
        SparkConf conf = conf(state);
        Throwable t = assertThrows(IllegalStateException.class,
                () -> new GpuschedDiscoveryPlugin().discoverResource(req("spark.driver", 1_000_000L), conf));
        assertTrue(chain(t).contains("NODE_TOO_SMALL"), chain(t));
        assertEquals(0, held(state));
    }

    @Test
    void zeroAmountHoldsNothing() throws Exception {
        Path state = state();
        SparkConf conf = conf(state);
        Optional<ResourceInformation> ri = new GpuschedDiscoveryPlugin().discoverResource(req("spark.driver", 0), conf);
        assertTrue(ri.isPresent(), "an amount of 0 is answered by this plugin, not passed on to the next");
        assertEquals("gpu", ri.get().name());
        assertEquals(0, ri.get().addresses().length, String.join(",", ri.get().addresses()));
        assertEquals(0, held(state));
        IllegalArgumentException negative = assertThrows(IllegalArgumentException.class,
                () -> new GpuschedDiscoveryPlugin().discoverResource(req("spark.driver", -1), conf));
        assertTrue(negative.getMessage().contains("-1") && negative.getMessage().contains("from 0"),
                negative.getMessage());
        assertEquals(0, held(state));
    }

    @Test
    void worldWritableStateDirIsRefusedNamingIt() throws Exception {
        Path state = state();
        Files.setPosixFilePermissions(state, PosixFilePermissions.fromString("rwxrwxrwx"));
        Throwable t = assertThrows(RuntimeException.class,
                () -> new GpuschedDiscoveryPlugin().discoverResource(req("spark.driver", 1), conf(state)));
        assertTrue(chain(t).contains(state.toString()), chain(t));
    }

    @Test
    void stateDirThatCannotExistIsRefusedNamingIt() throws Exception {
        Path file = Files.writeString(tmp.resolve("a-file"), "x");
        Path state = file.resolve("state");
        Throwable t = assertThrows(RuntimeException.class,
                () -> new GpuschedDiscoveryPlugin().discoverResource(req("spark.driver", 1), conf(state)));
        assertTrue(chain(t).contains(file.toString()), chain(t));
    }

    /**
     * A JVM that asks again (a second SparkContext after the first stopped, or a retried discovery) keeps what it
     * holds: the javadoc promises "the GPUs given to this JVM", and nothing may leak a second set.
     */
    @Test
    void askingTwiceFromOneJvmDoesNotLeakASecondSet() throws Exception {
        Path state = state();
        SparkConf conf = conf(state);
        ResourceInformation a = new GpuschedDiscoveryPlugin().discoverResource(req("spark.driver", 2), conf)
                .orElseThrow();
        ResourceInformation b = new GpuschedDiscoveryPlugin().discoverResource(req("spark.driver", 2), conf)
                .orElseThrow();
        assertEquals(Set.of(a.addresses()), Set.of(b.addresses()), "same JVM, same component: same GPUs");
        assertEquals(2, held(state), "the ledger holds 2 GPUs for this JVM, not 4");
    }

    /**
     * Issue 36 bounds job ids (printable, at most 256 characters); the driver's job id carries the application's
     * name, its user's free text: a name of 300 characters with a tab and an escape still gets its GPUs, recorded
     * under a bounded, printable job id.
     */
    @Test
    void aLongOrHostileApplicationNameStillGetsGpus() throws Exception {
        Path state = state();
        SparkConf conf = conf(state).set("spark.app.name", "etl\t\u001b[2J" + "x".repeat(300));
        try {
            ResourceInformation ri = new GpuschedDiscoveryPlugin().discoverResource(req("spark.driver", 1), conf)
                    .orElseThrow();
            assertEquals(1, ri.addresses().length);
            try (GpuInventory inv = GpuInventories.simulated("dgx1-v100");
                 GpuScheduler s = GpuScheduler.builder().inventory(inv).stateDir(state).build()) {
                String job = s.allocations().get(0).request().jobId().orElseThrow();
                assertTrue(job.startsWith("spark.driver of etl??[2J"), job);
                assertEquals(256, job.codePointCount(0, job.length()), job);
            }
        } finally {
            ProcessGpus.release("spark.driver/gpu");
        }
    }

    @Test
    void addressesAreIndicesOfTheNode() throws Exception {
        Path state = state();
        ResourceInformation ri = new GpuschedDiscoveryPlugin().discoverResource(req("spark.executor", 8),
                conf(state)).orElseThrow();
        assertEquals(List.of("0", "1", "2", "3", "4", "5", "6", "7"),
                List.of(ri.addresses()).stream().sorted().collect(Collectors.toList()));
        assertEquals("gpu", ri.name());
    }
}
