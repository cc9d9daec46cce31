package io.gpusched.spark.adversarial.components;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuScheduler;
import io.gpusched.spark.GpuschedDiscoveryPlugin;
import io.gpusched.spark.GpuschedSparkPlugin;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.spark.SparkConf;
import org.apache.spark.resource.ResourceID;
import org.apache.spark.resource.ResourceInformation;
import org.apache.spark.resource.ResourceRequest;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The Spark discovery plug-in's per-component promises (GpuschedDiscoveryPlugin Javadoc, README "Spark")
 * attacked in one JVM: components of different identities, the same identity twice, a Worker whose discovering
 * thread ends, amounts larger than the node, and give-back on stop. The ledger is read by an independent scheduler
 * on the same state directory; each test has its own state directory (holdings of one JVM are keyed per component,
 * so each test releases what it took through the documented plug-in before it ends).
 */
@Tag("adversarial")
class SparkComponentsAttackTest {

    @TempDir
    Path tmp;

    private Path state() throws Exception {
        Path s = Files.createDirectories(tmp.resolve("state"));
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

    private static Set<String> addresses(ResourceInformation ri) {
        return new TreeSet<>(List.of(ri.addresses()));
    }

    /** GPU indices held in the ledger, read by a scheduler of its own. */
    private static List<Integer> held(Path state) {
        try (GpuInventory inv = GpuInventories.simulated("dgx1-v100");
             GpuScheduler s = GpuScheduler.builder().inventory(inv).stateDir(state).build()) {
            s.refresh();
            List<Integer> out = new ArrayList<>();
            for (Allocation a : s.allocations()) {
                out.addAll(a.deviceIndices());
            }
            return out;
        }
    }

    private static void giveBack() {
        new GpuschedSparkPlugin().driverPlugin().shutdown();
        new GpuschedSparkPlugin().executorPlugin().shutdown();
    }

    @Test
    void driverAndExecutorInOneJvmGetDisjointGpusAndTheNodeRefusesTheRest() throws Exception {
        Path state = state();
        try {
            ResourceInformation d = new GpuschedDiscoveryPlugin().discoverResource(req("spark.driver", 3), conf(state))
                    .orElseThrow();
            ResourceInformation e = new GpuschedDiscoveryPlugin().discoverResource(req("spark.executor", 5),
                    conf(state)).orElseThrow();
            Set<String> both = new HashSet<>(addresses(d));
            both.retainAll(addresses(e));
            assertEquals(Set.of(), both, "driver " + addresses(d) + " and executor " + addresses(e) + " share GPUs");
            List<Integer> h = held(state);
            assertEquals(8, h.size(), "ledger: " + h);
            assertEquals(8, new HashSet<>(h).size(), "a GPU held twice in the ledger: " + h);
            // a Worker (another identity) on a full node is refused, naming gpusched's reason
            AtomicReference<Throwable> t = new AtomicReference<>();
            Thread w = new Thread(() -> {
                try {
                    new GpuschedDiscoveryPlugin().discoverResource(req("spark.worker", 1), conf(state));
                } catch (Throwable x) {
                    t.set(x);
                }
            }, "dispatcher-event-loop-review24e-full");
            w.start();
            w.join();
            assertTrue(t.get() != null && String.valueOf(t.get().getMessage()).contains("INSUFFICIENT_GPUS"),
                    "a full node must refuse: " + t.get());
        } finally {
            giveBack();
        }
        assertEquals(List.of(), held(state), "driver and executor gave their GPUs back on shutdown()");
    }

    /**
     * An amount larger than the node: refused at once with the permanent reason, naming the amount and the node's
     * size, and nothing held.
     */
    @Test
    void anAmountLargerThanTheNodeIsRefusedNamingItAndHoldsNothing() throws Exception {
        Path state = state();
        try {
            IllegalStateException x = assertThrows(IllegalStateException.class,
                    () -> new GpuschedDiscoveryPlugin().discoverResource(req("spark.executor", 9), conf(state)));
            String msg = x.getMessage();
            assertTrue(msg.contains("9"), "names the amount: " + msg);
            assertTrue(msg.contains("spark.executor"), "names the component: " + msg);
            assertTrue(msg.contains("NODE_TOO_SMALL") || msg.contains("INSUFFICIENT_GPUS"), msg);
            assertEquals(List.of(), held(state));
        } finally {
            giveBack();
        }
    }

    /**
     * The same identity asked again with a larger amount the node cannot serve: ProcessGpus "gives the old set back
     * before taking the new one", so nothing piles up and the refusal leaves nothing held; asking again as before
     * works.
     */
    @Test
    void aRefusedRediscoveryLeavesNothingPiledUp() throws Exception {
        Path state = state();
        try {
            new GpuschedDiscoveryPlugin().discoverResource(req("spark.driver", 2), conf(state)).orElseThrow();
            assertThrows(IllegalStateException.class,
                    () -> new GpuschedDiscoveryPlugin().discoverResource(req("spark.driver", 9), conf(state)));
            assertTrue(held(state).size() <= 2, "nothing piled up: " + held(state));
            Set<String> again = addresses(new GpuschedDiscoveryPlugin().discoverResource(req("spark.driver", 2),
                    conf(state)).orElseThrow());
            assertEquals(2, again.size());
            assertEquals(2, held(state).size(), "" + held(state));
        } finally {
            giveBack();
        }
    }

    /**
     * Two Workers of one JVM (local-cluster) discover from their own dispatcher threads: disjoint GPUs; when one
     * Worker's thread ends, its GPUs go back (Javadoc: "a Worker's GPUs when its RPC environment has shut down (the
     * dispatcher thread that discovered ended)") and the other Worker keeps its own.
     */
    @Test
    void workersOnTwoThreadsAreDisjointAndAnEndedWorkerGivesBack() throws Exception {
        Path state = state();
        AtomicReference<ResourceInformation> a = new AtomicReference<>();
        AtomicReference<ResourceInformation> b = new AtomicReference<>();
        AtomicReference<Throwable> err = new AtomicReference<>();
        java.util.concurrent.CountDownLatch stopB = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CountDownLatch stopA = new java.util.concurrent.CountDownLatch(1);
        Thread ta = new Thread(() -> {
            try {
                a.set(new GpuschedDiscoveryPlugin().discoverResource(req("spark.worker", 4), conf(state))
                        .orElseThrow());
                stopA.await();
            } catch (Throwable x) {
                err.set(x);
            }
        }, "dispatcher-event-loop-review24e-a");
        Thread tb = new Thread(() -> {
            try {
                b.set(new GpuschedDiscoveryPlugin().discoverResource(req("spark.worker", 4), conf(state))
                        .orElseThrow());
                stopB.await();
            } catch (Throwable x) {
                err.set(x);
            }
        }, "dispatcher-event-loop-review24e-b");
        ta.start();
        try {
            long until = System.nanoTime() + Duration.ofSeconds(30).toNanos();
            while (a.get() == null && err.get() == null && System.nanoTime() < until) {
                Thread.sleep(10);
            }
            tb.start();
            while (b.get() == null && err.get() == null && System.nanoTime() < until) {
                Thread.sleep(10);
            }
            assertEquals(null, err.get());
            Set<String> both = new HashSet<>(addresses(a.get()));
            both.retainAll(addresses(b.get()));
            assertEquals(Set.of(), both, "two Workers share GPUs: " + addresses(a.get()) + " " + addresses(b.get()));
            stopA.countDown();
            ta.join();
            // worker A's thread has ended: its 4 go back, B's 4 stay (deadline, not a timing assertion)
            List<Integer> h = held(state);
            while (h.size() != 4 && System.nanoTime() < until) {
                Thread.sleep(50);
                h = held(state);
            }
            assertEquals(4, h.size(), "after worker A's thread ended the ledger holds B's 4: " + h);
            Set<String> bIdx = addresses(b.get());
            assertEquals(bIdx, new TreeSet<>(h.stream().map(String::valueOf).toList()), "B keeps its own GPUs");
        } finally {
            stopA.countDown();
            stopB.countDown();
            ta.join();
            tb.join();
        }
        long until = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        while (!held(state).isEmpty() && System.nanoTime() < until) {
            Thread.sleep(50);
        }
        assertEquals(List.of(), held(state), "both Worker threads ended");
    }
}
