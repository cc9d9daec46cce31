package io.gpusched.spark;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuScheduler;
import io.gpusched.testing.Jdk;
import io.gpusched.testing.OwnThread;
import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;
import org.apache.spark.resource.ResourceID;
import org.apache.spark.resource.ResourceInformation;
import org.apache.spark.resource.ResourceRequest;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Spark drivers on one (simulated DGX-1) node sharing one node ledger: two driver JVMs started as child processes
 * draw disjoint GPUs; a third driver, a real local SparkContext in this JVM, fails to start with gpusched's reason
 * while they hold all eight; once one child is killed with SIGKILL, the local SparkContext starts and
 * {@code sc.resources()} shows GPUs the dead child held. The ledger is read back through a separate scheduler.
 */
class SparkDiscoveryTest {

    @TempDir
    Path state;
    final List<Process> children = new ArrayList<>();

    @AfterEach
    void killChildren() {
        children.forEach(Process::destroyForcibly);
    }

    @Test
    void driversOnOneNodeGetDisjointGpusTheNextIsRefusedAndAKilledDriversGpusReturn() throws Exception {
        Optional<String> noHadoop = Jdk.hadoopUgiUnavailable();
        assumeTrue(noHadoop.isEmpty(), noHadoop::get);
        Process a = driver(4);
        Process b = driver(4);
        Set<Integer> ga = gpus(a);
        Set<Integer> gb = gpus(b);
        assertThat(ga).hasSize(4).doesNotContainAnyElementsOf(gb);
        assertThat(gb).hasSize(4);
        assertThat(ledger()).containsEntry(a.pid(), ga).containsEntry(b.pid(), gb);

        Throwable refused = catchThrowable(() -> new SparkContext(SparkGpuExample.conf(1, state.toString(),
                "simulated:dgx1-v100")));
        assertThat(chain(refused)).contains("gpusched cannot give 1 gpu to the spark.driver")
                .contains("INSUFFICIENT_GPUS");

        a.destroyForcibly().waitFor(30, TimeUnit.SECONDS);
        SparkContext sc = new SparkContext(SparkGpuExample.conf(2, state.toString(), "simulated:dgx1-v100"));
        try {
            ResourceInformation gpu = sc.resources().get("gpu").get();
            Set<Integer> mine = Arrays.stream(gpu.addresses()).map(Integer::valueOf).collect(Collectors.toSet());
            assertThat(mine).hasSize(2).isSubsetOf(ga);
            Map<Long, Set<Integer>> l = ledger();
            assertThat(l).doesNotContainKey(a.pid()).containsEntry(b.pid(), gb)
                    .containsEntry(ProcessHandle.current().pid(), mine);
        } finally {
            sc.stop();
        }

        b.getOutputStream().close(); // b stops its SparkContext and exits normally: its shutdown hook releases
        assertThat(b.waitFor(60, TimeUnit.SECONDS)).isTrue();
        assertThat(b.exitValue()).isZero();
        assertThat(ledger()).doesNotContainKey(b.pid());
    }

    @Test
    void uuidAddressesAndBadSettings() {
        SparkConf conf = SparkGpuExample.conf(2, state.toString(), "simulated:dgx1-v100")
                .set("spark.gpusched.addresses", "uuid").set("spark.gpusched.memoryPerGpu", "16g");
        ResourceRequest req = new ResourceRequest(new ResourceID("spark.executor", "gpu"), 2, Optional.empty(),
                Optional.empty());
        ResourceInformation ri = new GpuschedDiscoveryPlugin().discoverResource(req, conf).orElseThrow();
        try (GpuInventory inv = GpuInventories.simulated("dgx1-v100")) {
            Set<String> uuids = inv.devices().stream().map(d -> d.uuid()).collect(Collectors.toSet());
            assertThat(ri.addresses()).hasSize(2);
            assertThat(uuids).contains(ri.addresses());
        }
        ResourceRequest fpga = new ResourceRequest(new ResourceID("spark.executor", "fpga"), 1, Optional.empty(),
                Optional.empty());
        assertThat(new GpuschedDiscoveryPlugin().discoverResource(fpga, conf)).isEmpty();

        conf.set("spark.gpusched.memoryPerGpu", "64g");
        assertThat(chain(catchThrowable(() -> new GpuschedDiscoveryPlugin().discoverResource(req, conf))))
                .contains("gpusched cannot give 2 gpu").contains("64");
        conf.set("spark.gpusched.addresses", "name");
        assertThat(catchThrowable(() -> new GpuschedDiscoveryPlugin().discoverResource(req, conf)))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("spark.gpusched.addresses")
                .hasMessageContaining("index or uuid");
        conf.set("spark.gpusched.addresses", "index").set("spark.gpusched.strategy", "fastest");
        assertThat(catchThrowable(() -> new GpuschedDiscoveryPlugin().discoverResource(req, conf)))
                .hasMessageContaining("spark.gpusched.strategy").hasMessageContaining("topology");
    }

    // ---------------------------------------------------------------------------------------------------------

    private Process driver(int gpus) throws Exception {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        cmd.addAll(List.of(SparkGpuExample.JAVA_OPTIONS));
        cmd.addAll(List.of("-Xmx512m", "-cp", System.getProperty("java.class.path"),
                SparkGpuExample.class.getName(), String.valueOf(gpus), state.toString(), "simulated:dgx1-v100",
                "--wait"));
        Process p = new ProcessBuilder(cmd).redirectError(new File(state.toFile(), "driver-" + children.size()
                + ".err")).start();
        children.add(p);
        return p;
    }

    /** @return the GPU indices a child driver printed (blocks until it prints or exits) */
    private static Set<Integer> gpus(Process p) throws Exception {
        BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
        CompletableFuture<String> line = OwnThread.supply(() -> {
            try {
                for (String l = r.readLine(); l != null; l = r.readLine()) {
                    if (l.startsWith("GPUS ") || l.startsWith("REFUSED ")) {
                        return l;
                    }
                }
                return "EOF";
            } catch (Exception e) {
                return e.toString();
            }
        });
        String l = line.get(120, TimeUnit.SECONDS);
        assertThat(l).startsWith("GPUS ");
        return Arrays.stream(l.substring(5).split(",")).map(Integer::valueOf)
                .collect(Collectors.toCollection(TreeSet::new));
    }

    /** @return live allocations in the ledger by holder pid, read by a scheduler of its own */
    private Map<Long, Set<Integer>> ledger() {
        try (GpuInventory inv = GpuInventories.simulated("dgx1-v100");
             GpuScheduler s = GpuScheduler.builder().inventory(inv).stateDir(state)
                     .maintenanceInterval(Duration.ZERO).build()) {
            s.refresh();
            return s.allocations().stream().collect(Collectors.toMap(
                    (Allocation a) -> a.request().holder().orElseThrow().pid(),
                    a -> new HashSet<>(a.deviceIndices()), (x, y) -> {
                        x.addAll(y);
                        return x;
                    }));
        }
    }

    private static String chain(Throwable t) {
        StringBuilder sb = new StringBuilder();
        for (Throwable c = t; c != null; c = c.getCause()) {
            sb.append(c.getClass().getSimpleName()).append(": ").append(c.getMessage()).append(" | ");
        }
        return sb.toString();
    }
}
