package io.gpusched.spark;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.host.ProcessGpus;
import io.gpusched.testing.Jdk;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code local-cluster[2,1,1024]}: two Spark Workers in this JVM, sharing one {@code SparkConf}, each discovering
 * 4 GPUs when it starts. They must hold disjoint GPUs (two holdings of this pid in the ledger, read by a scheduler
 * of its own), and give them back when the SparkContext stops the local cluster, while the JVM goes on.
 */
class LocalClusterTest {

    @TempDir
    Path tmp;

    @Test
    void twoWorkersOfOneJvmGetDisjointGpusAndGiveThemBackWhenTheClusterStops() throws Exception {
        Optional<String> noHadoop = Jdk.hadoopUgiUnavailable();
        assumeTrue(noHadoop.isEmpty(), noHadoop::get);
        Path state = Files.createDirectories(tmp.resolve("state"));
        System.setProperty("spark.testing", "true"); // LocalSparkCluster's Workers then work in temp dirs
        System.setProperty("spark.test.home", tmp.toString());
        SparkConf conf = new SparkConf(false).setMaster("local-cluster[2,1,1024]").setAppName("local-cluster-gpus")
                .set("spark.worker.resource.gpu.amount", "4")
                .set("spark.resources.discoveryPlugin", GpuschedDiscoveryPlugin.class.getName())
                .set("spark.gpusched.stateDir", state.toString())
                .set("spark.gpusched.inventory", "simulated:dgx1-v100")
                .set("spark.ui.enabled", "false").set("spark.driver.host", "127.0.0.1")
                // no executor is ever launched (each asks 2 cores, a Worker has 1): in a test JVM an executor
                // cannot start ("Cannot find any build directories"), and after 10 failed executors the Master
                // removes the application; SparkContext.stop() then fails in the scheduler backend ("Could not
                // find AppClient") before it stops the local cluster, so its Workers (and their GPUs) stay up.
                // That is what CI saw; this test is about the Workers, so it keeps executors out of it.
                .set("spark.executor.cores", "2");
        SparkContext sc = new SparkContext(conf);
        try {
            List<Set<Integer>> held = awaitHoldings(state, 2);
            assertThat(held.get(0)).hasSize(4).doesNotContainAnyElementsOf(held.get(1));
            assertThat(held.get(1)).hasSize(4);
        } finally {
            sc.stop();
            System.clearProperty("spark.testing");
            System.clearProperty("spark.test.home");
        }
        try {
            assertThat(awaitHoldings(state, 0)).as("after the local cluster stopped, in a JVM that goes on").isEmpty();
        } catch (AssertionError e) {
            throw new AssertionError(e.getMessage() + "; " + diagnosis(), e);
        }
    }

    /**
     * @return what this JVM's process-wide holdings are and which RPC dispatcher threads are still alive, with
     *         their stacks: what to read when the Workers' GPUs did not come back (as when the application had been
     *         removed before the SparkContext stopped: the local cluster was never stopped)
     */
    private static String diagnosis() {
        StringBuilder b = new StringBuilder("held in this JVM: " + ProcessGpus.held() + "; live dispatcher threads:");
        Thread.getAllStackTraces().forEach((t, stack) -> {
            if (t.getName().startsWith("dispatcher-") || t.getName().startsWith("gpusched-")) {
                b.append("\n  ").append(t.getName()).append('#').append(t.getId()).append(' ').append(t.getState());
                for (int i = 0; i < Math.min(12, stack.length); i++) {
                    b.append("\n      at ").append(stack[i]);
                }
            }
        });
        return b.toString();
    }

    /** @return this JVM's holdings in the ledger once there are {@code n} of them (waits up to 60 s) */
    private static List<Set<Integer>> awaitHoldings(Path state, int n) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        List<Set<Integer>> out;
        do {
            out = new ArrayList<>();
            try (GpuInventory inv = GpuInventories.simulated("dgx1-v100");
                 GpuScheduler s = GpuScheduler.builder().inventory(inv).stateDir(state)
                         .maintenanceInterval(Duration.ZERO).build()) {
                s.refresh();
                for (Allocation a : s.allocations()) {
                    assertThat(a.request().holder().orElseThrow().pid()).isEqualTo(ProcessHandle.current().pid());
                    out.add(new HashSet<>(a.deviceIndices()));
                }
            }
            if (out.size() == n) {
                return out;
            }
            Thread.sleep(200);
        } while (System.nanoTime() < end);
        throw new AssertionError("the ledger holds " + out + ", expected " + n + " holdings");
    }
}
