package io.gpusched.core.adversarial.topology;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationStrategies;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.strategy.TopologyAwareStrategy;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The strategy decides outside the scheduler's and the node's lock, and the commit re-validates. A
 * {@link GateStrategy} holds one search ("slow") open after it has picked; meanwhile other threads (and another JVM)
 * allocate, release and change health. Judged by order (the others finish while the gate is still shut; the gate is
 * opened only after), and by checkers written here: the slow allocation never holds a device another live allocation
 * holds or one made unhealthy before it was committed.
 */
@Tag("adversarial")
class DecideOutsideTheLockAttackTest {

    @TempDir
    Path tmp;

    GpuScheduler scheduler(PairedLinkInventory inv, GateStrategy gate, boolean ledger) {
        GpuScheduler.Builder b = GpuScheduler.builder().inventory(inv).strategy(gate).auditLogging(false)
                .maintenanceInterval(java.time.Duration.ZERO);
        if (ledger) {
            b.stateDir(tmp.resolve("state"));
        }
        return b.build();
    }

    static GateStrategy gate() {
        return new GateStrategy(AllocationStrategies.topologyAware(TopologyAwareStrategy.Objective.SET));
    }

    static GpuRequest slow(int k) {
        return GpuRequest.builder().count(k).owner("slow").build();
    }

    /** Eight threads allocate and release 50 times each while the slow search is held; all finish before it opens. */
    @ParameterizedTest
    @ValueSource(booleans = {false, true})
    void othersCompleteWhileOneSearchIsHeld(boolean ledger) throws Exception {
        PairedLinkInventory inv = new PairedLinkInventory(16);
        GateStrategy g = gate();
        ExecutorService pool = Executors.newFixedThreadPool(9);
        try (GpuScheduler s = scheduler(inv, g, ledger)) {
            Future<Allocation> slowOne = pool.submit(() -> s.allocate(slow(4)));
            assertTrue(g.picked.await(60, TimeUnit.SECONDS), "slow search never ran");
            List<Future<Integer>> fast = new ArrayList<>();
            for (int t = 0; t < 8; t++) {
                fast.add(pool.submit(() -> {
                    int done = 0;
                    for (int i = 0; i < 50; i++) {
                        Allocation a = s.allocate(GpuRequest.builder().count(1).owner("fast").build());
                        assertTrue(s.release(a.id()));
                        done++;
                    }
                    return done;
                }));
            }
            for (Future<Integer> f : fast) {
                // liveness guard only: were they waiting on the held search, none could finish while the gate is shut
                assertEquals(50, f.get(120, TimeUnit.SECONDS));
            }
            assertFalse(slowOne.isDone(), "the slow search finished before its gate opened");
            g.gate.countDown();
            Allocation a = slowOne.get(60, TimeUnit.SECONDS);
            assertEquals(4, new HashSet<>(a.deviceIndices()).size());
        } finally {
            g.gate.countDown();
            pool.shutdownNow();
        }
    }

    /** The slow pick is taken by another allocation meanwhile: the slow one must be placed elsewhere. */
    @ParameterizedTest
    @ValueSource(booleans = {false, true})
    void aPickTakenMeanwhileIsNeverCommitted(boolean ledger) throws Exception {
        PairedLinkInventory inv = new PairedLinkInventory(8);
        GateStrategy g = gate();
        ExecutorService pool = Executors.newSingleThreadExecutor();
        try (GpuScheduler s = scheduler(inv, g, ledger)) {
            Future<Allocation> slowOne = pool.submit(() -> s.allocate(slow(2)));
            assertTrue(g.picked.await(60, TimeUnit.SECONDS));
            List<Integer> pick = g.firstPick;
            Allocation thief = s.allocate(GpuRequest.builder().count(2).requiredDevices(pick).owner("thief").build());
            assertEquals(new HashSet<>(pick), new HashSet<>(thief.deviceIndices()));
            g.gate.countDown();
            Allocation a = slowOne.get(60, TimeUnit.SECONDS);
            assertTrue(Collections.disjoint(a.deviceIndices(), thief.deviceIndices()),
                    "committed a held device: slow " + a.deviceIndices() + ", thief " + thief.deviceIndices());
            checkNoOverlap(s.allocations());
        } finally {
            g.gate.countDown();
            pool.shutdownNow();
        }
    }

    /** A device of the slow pick turns UNHEALTHY (listener returned) before the commit: never committed. */
    @ParameterizedTest
    @ValueSource(booleans = {false, true})
    void aPickMadeUnhealthyMeanwhileIsNeverCommitted(boolean ledger) throws Exception {
        PairedLinkInventory inv = new PairedLinkInventory(8);
        GateStrategy g = gate();
        ExecutorService pool = Executors.newSingleThreadExecutor();
        try (GpuScheduler s = scheduler(inv, g, ledger)) {
            Future<Allocation> slowOne = pool.submit(() -> s.allocate(slow(2)));
            assertTrue(g.picked.await(60, TimeUnit.SECONDS));
            int sick = g.firstPick.get(0);
            inv.change(sick, GpuHealth.unhealthy("XID 79: review23"));
            g.gate.countDown();
            Allocation a = slowOne.get(60, TimeUnit.SECONDS);
            assertFalse(a.deviceIndices().contains(sick), "committed unhealthy " + sick + ": " + a.deviceIndices());
        } finally {
            g.gate.countDown();
            pool.shutdownNow();
        }
    }

    /**
     * The slow pick is taken meanwhile and released while a process still runs on it: it is DRAINING at the commit,
     * and never committed.
     */
    @ParameterizedTest
    @ValueSource(booleans = {false, true})
    void aPickDrainingMeanwhileIsNeverCommitted(boolean ledger) throws Exception {
        PairedLinkInventory inv = new PairedLinkInventory(8);
        inv.listsProcesses = true;
        GateStrategy g = gate();
        ExecutorService pool = Executors.newSingleThreadExecutor();
        try (GpuScheduler s = scheduler(inv, g, ledger)) {
            Future<Allocation> slowOne = pool.submit(() -> s.allocate(slow(2)));
            assertTrue(g.picked.await(60, TimeUnit.SECONDS));
            List<Integer> pick = g.firstPick;
            Allocation thief = s.allocate(GpuRequest.builder().count(2).requiredDevices(pick).owner("thief").build());
            inv.busy.addAll(pick);
            assertTrue(s.release(thief.id()));
            assertEquals(io.gpusched.core.DeviceState.Pool.DRAINING, s.devices().stream()
                    .filter(d -> d.index() == pick.get(0)).findFirst().orElseThrow().pool(), "precondition: draining");
            g.gate.countDown();
            Allocation a = slowOne.get(60, TimeUnit.SECONDS);
            assertTrue(Collections.disjoint(a.deviceIndices(), pick), "committed draining " + pick + ": " + a);
        } finally {
            g.gate.countDown();
            pool.shutdownNow();
        }
    }

    /**
     * A device of the slow pick is freed meanwhile (it was held when the snapshot was taken: the pick cannot hold it)
     * and another is taken: the answer is a valid set, disjoint from every live allocation.
     */
    @ParameterizedTest
    @ValueSource(booleans = {false, true})
    void releaseAndAllocateBothRaceTheHeldSearch(boolean ledger) throws Exception {
        PairedLinkInventory inv = new PairedLinkInventory(8);
        GateStrategy g = gate();
        ExecutorService pool = Executors.newSingleThreadExecutor();
        try (GpuScheduler s = scheduler(inv, g, ledger)) {
            Allocation before = s.allocate(GpuRequest.builder().count(2).requiredDevices(0, 1).owner("b").build());
            Future<Allocation> slowOne = pool.submit(() -> s.allocate(slow(4)));
            assertTrue(g.picked.await(60, TimeUnit.SECONDS));
            assertFalse(g.firstPick.contains(0) || g.firstPick.contains(1), "snapshot pick used held devices");
            assertTrue(s.release(before.id()));
            Allocation thief = s.allocate(GpuRequest.builder().count(1).requiredDevices(g.firstPick.get(3))
                    .owner("thief").build());
            g.gate.countDown();
            Allocation a = slowOne.get(60, TimeUnit.SECONDS);
            assertEquals(4, new HashSet<>(a.deviceIndices()).size());
            assertTrue(Collections.disjoint(a.deviceIndices(), thief.deviceIndices()), a + " vs " + thief);
            checkNoOverlap(s.allocations());
        } finally {
            g.gate.countDown();
            pool.shutdownNow();
        }
    }

    /**
     * Two processes on one ledger: this JVM holds its slow search open, a child JVM allocates and releases 100 times
     * and must exit first; both write their grants with CLOCK_MONOTONIC stamps (System.nanoTime, one clock for the
     * machine); the child's last grant takes the held search's pick and keeps it. The checker: no device is definitely
     * held by two grants at once (from the call's return to the call of release, or forever when kept).
     */
    @ParameterizedTest
    @ValueSource(ints = {0})
    void twoProcessesOneLedgerWhileOneSearchIsHeld(int unused) throws Exception {
        Path state = tmp.resolve("state");
        Path childLog = tmp.resolve("child.log");
        PairedLinkInventory inv = new PairedLinkInventory(8);
        GateStrategy g = gate();
        ExecutorService pool = Executors.newSingleThreadExecutor();
        try (GpuScheduler s = scheduler(inv, g, true)) {
            Future<long[]> slowOne = pool.submit(() -> {
                Allocation a = s.allocate(slow(2));
                long end = System.nanoTime();
                return new long[]{end, a.deviceIndices().get(0), a.deviceIndices().get(1)};
            });
            assertTrue(g.picked.await(60, TimeUnit.SECONDS));
            String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
            Process child = new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"),
                    Child23.class.getName(), state.toString(), childLog.toString(), "100",
                    g.firstPick.get(0) + "," + g.firstPick.get(1))
                    .redirectErrorStream(true).redirectOutput(tmp.resolve("child.out").toFile()).start();
            // liveness guard only: blocked behind the held search, the child could not finish before the gate opens
            boolean exited = child.waitFor(180, TimeUnit.SECONDS);
            if (!exited) {
                child.destroyForcibly();
            }
            assertTrue(exited, "child did not finish while the search was held: "
                    + Files.readString(tmp.resolve("child.out")));
            assertEquals(0, child.exitValue(), Files.readString(tmp.resolve("child.out")));
            assertFalse(slowOne.isDone());
            long gateOpen = System.nanoTime();
            g.gate.countDown();
            long[] slowGrant = slowOne.get(60, TimeUnit.SECONDS);
            List<long[]> grants = new ArrayList<>(); // {device, heldFrom, heldUntil}
            for (String line : Files.readAllLines(childLog)) {
                String[] f = line.split(" ");
                long from = Long.parseLong(f[0]);
                long until = Long.parseLong(f[1]);
                for (int i = 2; i < f.length; i++) {
                    grants.add(new long[]{Integer.parseInt(f[i]), from, until});
                }
            }
            assertEquals(101, Files.readAllLines(childLog).size());
            for (int i = 0; i < 2; i++) {
                grants.add(new long[]{slowGrant[1 + i], slowGrant[0], Long.MAX_VALUE});
            }
            assertTrue(gateOpen < slowGrant[0]);
            for (int i = 0; i < grants.size(); i++) {
                for (int j = i + 1; j < grants.size(); j++) {
                    long[] x = grants.get(i);
                    long[] y = grants.get(j);
                    if (x[0] == y[0] && x[1] < y[2] && y[1] < x[2]) {
                        throw new AssertionError("device " + x[0] + " held twice: [" + x[1] + "," + x[2] + ") and ["
                                + y[1] + "," + y[2] + ")");
                    }
                }
            }
        } finally {
            g.gate.countDown();
            pool.shutdownNow();
        }
    }

    static void checkNoOverlap(List<Allocation> live) {
        Set<Integer> seen = new HashSet<>();
        for (Allocation a : live) {
            for (int d : a.deviceIndices()) {
                assertTrue(seen.add(d), "device " + d + " in two live allocations: " + live);
            }
        }
    }

    /** The child: allocate 2 and release, n times, logging "heldFrom heldUntil devices..." per grant. */
    static final class Child23 {
        public static void main(String[] args) throws Exception {
            Path state = Path.of(args[0]);
            int n = Integer.parseInt(args[2]);
            List<String> lines = new ArrayList<>();
            try (GpuScheduler s = GpuScheduler.builder().inventory(new PairedLinkInventory(8))
                    .strategy(AllocationStrategies.topologyAware()).auditLogging(false)
                    .maintenanceInterval(java.time.Duration.ZERO).stateDir(state).build()) {
                for (int i = 0; i < n; i++) {
                    Allocation a = s.allocate(GpuRequest.builder().count(2).owner("child").build());
                    long from = System.nanoTime();
                    StringBuilder sb = new StringBuilder();
                    for (int d : a.deviceIndices()) {
                        sb.append(' ').append(d);
                    }
                    long until = System.nanoTime();
                    if (!s.release(a.id())) {
                        throw new IllegalStateException("release refused " + a.id());
                    }
                    lines.add(from + " " + until + sb);
                }
                // last: take the other process's held pick and keep it (a process-bound holder is not used)
                String[] pick = args[3].split(",");
                Allocation last = s.allocate(GpuRequest.builder().count(2).owner("child")
                        .requiredDevices(Integer.parseInt(pick[0]), Integer.parseInt(pick[1])).build());
                lines.add(System.nanoTime() + " " + Long.MAX_VALUE + " " + last.deviceIndices().get(0) + " "
                        + last.deviceIndices().get(1));
            }
            Files.write(Path.of(args[1]), lines);
        }
    }
}
