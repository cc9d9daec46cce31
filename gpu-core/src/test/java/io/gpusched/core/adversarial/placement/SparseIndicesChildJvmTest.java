package io.gpusched.core.adversarial.placement;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationStrategies;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.SimulatedGpuInventory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A node description with device indices 0 and 60000, end to end (parse, scheduler, every built-in strategy, required
 * devices) in a child JVM with a 48 MiB heap: anything sized by the largest index squared (14 GB of ints) fails there
 * with OutOfMemoryError. The child's output and exit code are read.
 */
class SparseIndicesChildJvmTest {

    static final String YAML = """
            node: sparse
            description: two GPUs with far-apart indices
            defaults: {vendor: NVIDIA, name: NVIDIA A100, memory: 40GiB, compute_capability: "8.0"}
            devices:
              - {index: 0, pci_bus_id: "00000000:17:00.0", numa_node: 0}
              - {index: 60000, pci_bus_id: "00000000:18:00.0", numa_node: 0}
            links:
              - [0, 60000, 4]
            """;

    /** Child entry point: args[0] is the node description. Prints one line per strategy, then DONE. */
    public static void main(String[] args) {
        SimulatedGpuInventory inv = GpuInventories.simulated(args[0]);
        for (String name : AllocationStrategies.names()) {
            try (GpuScheduler s = GpuScheduler.builder().inventory(inv).strategy(AllocationStrategies.byName(name))
                    .auditLogging(false).build()) {
                Allocation one = s.allocate(GpuRequest.builder().count(1).requiredDevices(60000).build());
                Allocation other = s.allocate(GpuRequest.builder().count(1).build());
                s.release(one.id());
                s.release(other.id());
                Allocation both = s.allocate(GpuRequest.builder().count(2).requiredDevices(60000).build());
                System.out.println(name + " " + one.deviceIndices() + " " + other.deviceIndices() + " "
                        + both.deviceIndices().stream().sorted().toList());
            }
        }
        System.out.println("DONE");
    }

    @Test
    void sparseNodeRunsInASmallHeap(@TempDir Path dir) throws Exception {
        Path yaml = dir.resolve("sparse.yaml");
        Files.writeString(yaml, YAML);
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        Process p = new ProcessBuilder(java, "-Xmx48m", "-XX:+ExitOnOutOfMemoryError", "-cp",
                System.getProperty("java.class.path"), SparseIndicesChildJvmTest.class.getName(), yaml.toString())
                .redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(5, TimeUnit.MINUTES), "child did not exit: " + out);
        assertEquals(0, p.exitValue(), "child output:\n" + out);
        List<String> lines = out.lines().filter(l -> !l.startsWith("[") && !l.isBlank()).toList();
        assertEquals("DONE", lines.get(lines.size() - 1), out);
        for (String name : AllocationStrategies.names()) {
            assertTrue(lines.contains(name + " [60000] [0] [0, 60000]"), name + " in:\n" + out);
        }
    }
}
