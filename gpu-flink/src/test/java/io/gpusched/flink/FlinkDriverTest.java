package io.gpusched.flink;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuScheduler;
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
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.apache.flink.configuration.Configuration;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * TaskManagers on one (simulated DGX-1) node sharing one node ledger: two TaskManager JVMs (each a Flink cluster of
 * one TaskManager, started as child processes) run a job whose operator reads
 * {@code getRuntimeContext().getExternalResourceInfos("gpu")}: disjoint GPUs, {@code index} and {@code uuid} as the
 * node has them. After one is killed with SIGKILL, a TaskManager in this JVM gets GPUs the dead one held.
 */
class FlinkDriverTest {

    @TempDir
    Path state;
    final List<Process> children = new ArrayList<>();

    @AfterEach
    void killChildren() {
        children.forEach(Process::destroyForcibly);
    }

    @Test
    void taskManagersOnOneNodeGetDisjointGpusAndAKilledOnesGpusReturn() throws Exception {
        Process a = taskManager(4);
        Process b = taskManager(4);
        Map<Integer, String> ga = gpus(a);
        Map<Integer, String> gb = gpus(b);
        assertThat(ga).hasSize(4);
        assertThat(gb).hasSize(4);
        assertThat(ga.keySet()).doesNotContainAnyElementsOf(gb.keySet());
        try (GpuInventory inv = GpuInventories.simulated("dgx1-v100")) {
            for (GpuDevice d : inv.devices()) {
                String uuid = ga.containsKey(d.index()) ? ga.get(d.index()) : gb.get(d.index());
                assertThat(uuid).as("uuid of GPU %d", d.index()).isEqualTo(d.uuid());
            }
        }
        assertThat(ledger()).containsEntry(a.pid(), ga.keySet()).containsEntry(b.pid(), gb.keySet());

        a.destroyForcibly().waitFor(30, TimeUnit.SECONDS);
        FlinkGpuExample.SEEN.clear();
        try (GpuMiniCluster mc = FlinkGpuExample.run(FlinkGpuExample.conf(2, state.toString(),
                "simulated:dgx1-v100"))) {
            Set<Integer> mine = FlinkGpuExample.SEEN.stream().map(s -> Integer.valueOf(s.split("/")[0]))
                    .collect(Collectors.toSet());
            assertThat(mine).hasSize(2).isSubsetOf(ga.keySet());
            assertThat(ledger()).doesNotContainKey(a.pid()).containsEntry(ProcessHandle.current().pid(), mine);
        }
    }

    @Test
    void refusalSaysWhyAndBadParametersAreNamed() {
        Configuration p = new Configuration();
        p.setString("state-dir", state.toString());
        p.setString("inventory", "simulated:dgx1-v100");
        GpuschedDriver d = (GpuschedDriver) new GpuschedDriverFactory().createExternalResourceDriver(p);
        assertThat(catchThrowable(() -> d.retrieveResourceInfo(9))).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("gpusched cannot give 9 GPU(s) to the Flink TaskManager")
                .hasMessageContaining("NODE_TOO_SMALL");
        p.setString("strategy", "fastest");
        assertThat(catchThrowable(() -> new GpuschedDriverFactory().createExternalResourceDriver(p)))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("param.strategy")
                .hasMessageContaining("topology");
        p.setString("strategy", "topology");
        p.setString("memory-per-gpu", "lots");
        assertThat(catchThrowable(() -> new GpuschedDriverFactory().createExternalResourceDriver(p)))
                .hasMessageContaining("memory-per-gpu").hasMessageContaining("16GB");
    }

    // ---------------------------------------------------------------------------------------------------------

    private Process taskManager(int gpus) throws Exception {
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-Xmx384m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp",
                System.getProperty("java.class.path"), FlinkGpuExample.class.getName(),
                String.valueOf(gpus), state.toString(), "simulated:dgx1-v100", "--wait"));
        Process p = new ProcessBuilder(cmd).redirectError(new File(state.toFile(), "tm-" + children.size() + ".err"))
                .start();
        children.add(p);
        return p;
    }

    /** @return index to uuid as the child's operator saw them */
    private static Map<Integer, String> gpus(Process p) throws Exception {
        BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
        String l = OwnThread.supply(() -> {
            try {
                for (String x = r.readLine(); x != null; x = r.readLine()) {
                    if (x.startsWith("GPUS ")) {
                        return x;
                    }
                }
                return "EOF";
            } catch (Exception e) {
                return e.toString();
            }
        }).get(120, TimeUnit.SECONDS);
        assertThat(l).startsWith("GPUS ");
        return Arrays.stream(l.substring(5).split(",")).filter(s -> !s.isEmpty()).map(s -> s.split("/"))
                .collect(Collectors.toMap(s -> Integer.valueOf(s[0]), s -> s[1]));
    }

    private Map<Long, Set<Integer>> ledger() {
        try (GpuInventory inv = GpuInventories.simulated("dgx1-v100");
             GpuScheduler s = GpuScheduler.builder().inventory(inv).stateDir(state)
                     .maintenanceInterval(Duration.ZERO).build()) {
            s.refresh();
            return s.allocations().stream().collect(Collectors.toMap(
                    (Allocation a) -> a.request().holder().orElseThrow().pid(),
                    a -> new HashSet<>(a.deviceIndices()), (x, y) -> {
                        x.addAll(y);
                        return new TreeSet<>(x);
                    }));
        }
    }
}
