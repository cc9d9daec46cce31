package io.gpusched.core.adversarial.topology;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.gpusched.core.AllocationStrategy;
import io.gpusched.core.AllocationStrategy.Choice;
import io.gpusched.core.DeviceState;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.PcieLevel;
import io.gpusched.core.PlacementQuality;
import io.gpusched.core.SchedulingView;
import io.gpusched.core.strategy.ThermalAwareStrategy;
import io.gpusched.core.strategy.TopologyAwareStrategy;
import io.gpusched.core.strategy.TopologyAwareStrategy.Objective;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Every certificate the topology strategy gives is checked against {@link BruteForceOracle}'s brute force, on nodes
 * chosen to make bounds lie: link counts near the long's range, all-equal links, one heavy clique, partitions (twins),
 * required and held devices, k = 1, n - 1 and n; with the smallest budget (1,000 units), the default and EXACT.
 * "Proven optimal" must equal the brute force's full key (the Javadoc says tie-breaks included); "within X %" must
 * leave the primary key at least (100 - X) % of the optimum's.
 */
@Tag("adversarial")
class CertificateBruteForceTest {

    static final java.util.concurrent.atomic.AtomicInteger PROVEN = new java.util.concurrent.atomic.AtomicInteger();
    static final java.util.concurrent.atomic.AtomicInteger WITHIN = new java.util.concurrent.atomic.AtomicInteger();

    /** Says how many claims of each kind the brute force checked (so a run that checked none shows it). */
    @org.junit.jupiter.api.AfterAll
    static void counts() {
        System.out.println("topology certificates checked against the brute force: proven optimal " + PROVEN
                + ", within X % " + WITHIN);
    }

    static final long[] BUDGETS = {1_000, TopologyAwareStrategy.DEFAULT_WORK_BUDGET, TopologyAwareStrategy.EXACT};

    enum Shape { RANDOM, ALL_EQUAL, HEAVY_CLIQUE, PARTITIONS, HUGE_LINKS }

    record Node(SchedulingView view, String what) {
    }

    static Node node(Random r, Shape shape, int n, int heldEvery) {
        List<GpuDevice> devs = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            devs.add(BruteForceOracle.device(i));
        }
        GpuTopology.Builder b = GpuTopology.builder(devs);
        int clique = Math.max(2, n / 3);
        int parts = 1 + r.nextInt(3);
        for (int i = 0; i < n; i++) {
            for (int j = i + 1; j < n; j++) {
                int links;
                PcieLevel lvl;
                switch (shape) {
                    case ALL_EQUAL -> { links = 2; lvl = PcieLevel.NODE; }
                    case HEAVY_CLIQUE -> {
                        links = i < clique && j < clique ? 1_000_000 : r.nextInt(2);
                        lvl = PcieLevel.values()[1 + r.nextInt(PcieLevel.values().length - 1)];
                    }
                    case PARTITIONS -> {
                        // packages of (parts + 1) partitions: INTERNAL, 4 links inside; 0-2 links between packages
                        int pi = i / (parts + 1);
                        int pj = j / (parts + 1);
                        links = pi == pj ? 4 : (pi + pj) % 3;
                        lvl = pi == pj ? PcieLevel.INTERNAL : PcieLevel.SYSTEM;
                    }
                    case HUGE_LINKS -> {
                        links = Integer.MAX_VALUE - r.nextInt(3);
                        lvl = PcieLevel.values()[1 + r.nextInt(PcieLevel.values().length - 1)];
                    }
                    default -> {
                        links = r.nextInt(3) == 0 ? 1 + r.nextInt(4) : 0;
                        lvl = PcieLevel.values()[1 + r.nextInt(PcieLevel.values().length - 1)];
                    }
                }
                b.links(i, j, links).pcie(i, j, lvl);
            }
        }
        GpuTopology t = b.build();
        List<DeviceState> all = new ArrayList<>();
        List<DeviceState> cands = new ArrayList<>();
        for (GpuDevice d : devs) {
            DeviceState s = heldEvery > 0 && r.nextInt(heldEvery) == 0 ? BruteForceOracle.held(d)
                    : DeviceState.idle(d, GpuHealth.HEALTHY);
            all.add(s);
            if (s.exclusiveHolder().isEmpty()) {
                cands.add(s);
            }
        }
        Collections.shuffle(cands, r); // candidate order is the last tie-break: not the index order
        return new Node(BruteForceOracle.view(all, cands, t), shape + " n=" + n + " free=" + cands.size());
    }

    /** Checks one answer; returns whether its certificate was checked against the brute force. */
    static boolean check(AllocationStrategy s, Objective o, GpuRequest req, Node node, boolean oracle) {
        SchedulingView v = node.view();
        Choice c;
        try {
            c = s.choose(req, v);
        } catch (GpuAllocationException e) {
            // documented only for sums that could leave a long: must be INVALID_REQUEST
            assertEquals(GpuAllocationException.Reason.INVALID_REQUEST, e.reason(), node.what() + ": " + e);
            return false;
        }
        String where = node.what() + " " + o + " k=" + req.count() + " req=" + req.requiredDevices() + " via "
                + s.name() + " got " + c.devices() + " " + c.quality().describe();
        assertNull(BruteForceOracle.invalid(req, v, c.devices()), where);
        PlacementQuality q = c.quality();
        assertTrue(q.rated(), "topology must rate its choice: " + where);
        if (!oracle) {
            return false;
        }
        long[] best = BruteForceOracle.best(o, req, v);
        long[] got = BruteForceOracle.key(o, v, c.devices());
        if (q.provenOptimal()) {
            PROVEN.incrementAndGet();
            assertEquals(Arrays.toString(best), Arrays.toString(got), "claims proven optimal: " + where);
        } else {
            WITHIN.incrementAndGet();
            double x = q.withinPercent();
            assertTrue(x >= 0 && x <= 100, where);
            // got >= best * (1 - x/100), computed without overflow in doubles with a relative slack of 1e-9
            double lhs = (double) got[0];
            double rhs = (double) best[0] * (1 - x / 100.0);
            assertTrue(lhs >= rhs - Math.abs(rhs) * 1e-9, "claims within " + x + " %: optimum " + best[0]
                    + ", answer " + got[0] + " (" + where + ")");
        }
        return true;
    }

    static void sweep(Shape shape, long seed, int nodes) {
        sweep(shape, seed, nodes, 4, 11);
    }

    static void sweep(Shape shape, long seed, int nodes, int minN, int spread) {
        Random r = new Random(seed);
        int checked = 0;
        for (int round = 0; round < nodes; round++) {
            int n = minN + r.nextInt(spread);
            Node node = node(r, shape, n, round % 3 == 0 ? 0 : 4);
            List<DeviceState> cands = node.view().candidates();
            int free = cands.size();
            if (free == 0) {
                continue;
            }
            int[] ks = {1, 2, 3, free / 2, free - 2, free - 1, free};
            for (int k : ks) {
                if (k < 1 || k > free) {
                    continue;
                }
                for (int withRequired = 0; withRequired < 2; withRequired++) {
                    GpuRequest.Builder rb = GpuRequest.builder().count(k);
                    if (withRequired == 1) {
                        int nreq = Math.min(k, 1 + r.nextInt(2));
                        List<Integer> req = new ArrayList<>();
                        for (int i = 0; i < nreq; i++) {
                            req.add(cands.get(r.nextInt(free)).index());
                        }
                        rb.requiredDevices(req.stream().distinct().toList());
                    }
                    GpuRequest req = rb.build();
                    boolean oracle = BruteForceOracle.subsets(free, k) <= 20_000;
                    for (Objective o : Objective.values()) {
                        for (long budget : BUDGETS) {
                            if (check(new TopologyAwareStrategy(o, budget), o, req, node, oracle)) {
                                checked++;
                            }
                        }
                    }
                }
            }
        }
        assertTrue(checked > 0, "nothing checked for " + shape);
    }

    /** 24 to 32 devices: the budget of 1,000 units runs out; k small or near the pool's size keeps the brute force. */
    @Test
    void largerNodesWithKNearTheEnds() {
        for (Shape shape : Shape.values()) {
            sweep(shape, 2320 + shape.ordinal(), 3, 24, 9);
        }
    }

    @Test
    void randomIrregularNodes() {
        sweep(Shape.RANDOM, 2311, 40);
    }

    @Test
    void allEqualLinksEveryTieDecidedByTheDocumentedTieBreaks() {
        sweep(Shape.ALL_EQUAL, 2312, 25);
    }

    @Test
    void oneHeavyClique() {
        sweep(Shape.HEAVY_CLIQUE, 2313, 30);
    }

    @Test
    void partitionedPackages() {
        sweep(Shape.PARTITIONS, 2314, 30);
    }

    /**
     * Link counts of about 2^31 on every pair: a pair scores ~2.1e11; 14 devices' sums stay far inside a long, so the
     * answer must be exact or refused with INVALID_REQUEST, never wrong.
     */
    @Test
    void linkCountsNearIntegerMaxValue() {
        sweep(Shape.HUGE_LINKS, 2315, 20);
    }

    /** The thermal strategy (no metrics: every device ties) passes its base's certificate through, and it is true. */
    @Test
    void thermalPassesATrueCertificateThrough() {
        Random r = new Random(2316);
        int checked = 0;
        for (int round = 0; round < 30; round++) {
            Node node = node(r, round % 2 == 0 ? Shape.RANDOM : Shape.HEAVY_CLIQUE, 6 + r.nextInt(8), 4);
            int free = node.view().candidates().size();
            for (int k = 1; k <= free; k++) {
                for (long budget : new long[]{1_000, TopologyAwareStrategy.EXACT}) {
                    TopologyAwareStrategy base = new TopologyAwareStrategy(Objective.SET, budget);
                    ThermalAwareStrategy th = new ThermalAwareStrategy(base, Duration.ofSeconds(30));
                    GpuRequest req = GpuRequest.builder().count(k).build();
                    Choice viaBase = base.choose(req, node.view());
                    Choice viaThermal = th.choose(req, node.view());
                    assertTrue(viaThermal.quality().rated(), "thermal answered not rated over " + base.name());
                    if (viaThermal.devices().equals(viaBase.devices())) {
                        assertEquals(viaBase.quality(), viaThermal.quality(), "same set, other certificate");
                    }
                    if (check(th, Objective.SET, req, node, BruteForceOracle.subsets(free, k) <= 20_000)) {
                        checked++;
                    }
                }
            }
        }
        assertTrue(checked > 0);
    }

    /** Refusal for overflow must name the request, not leave a wrong answer: 64 devices, every pair at MAX links. */
    @Test
    void aNodeWhoseSumsCannotFitALongIsRefusedOrAnsweredValidly() {
        int n = 64;
        List<GpuDevice> devs = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            devs.add(BruteForceOracle.device(i));
        }
        GpuTopology.Builder b = GpuTopology.builder(devs);
        for (int i = 0; i < n; i++) {
            for (int j = i + 1; j < n; j++) {
                b.links(i, j, Integer.MAX_VALUE).pcie(i, j, PcieLevel.SYSTEM);
            }
        }
        GpuTopology t = b.build();
        List<DeviceState> all = devs.stream().map(d -> DeviceState.idle(d, GpuHealth.HEALTHY)).toList();
        SchedulingView v = BruteForceOracle.view(all, all, t);
        for (Objective o : Objective.values()) {
            for (int k : new int[]{1, 2, 32, 63, 64}) {
                GpuRequest req = GpuRequest.builder().count(k).build();
                try {
                    Choice c = new TopologyAwareStrategy(o, TopologyAwareStrategy.DEFAULT_WORK_BUDGET).choose(req, v);
                    assertNull(BruteForceOracle.invalid(req, v, c.devices()), o + " k=" + k);
                    // every set is equal in SET's primary key; any claim other than optimal/0 % would be odd but legal
                    if (o == Objective.SET && c.quality().provenOptimal()) {
                        // ties by affinity: all equal; last by candidate order: the first k candidates
                        assertEquals(all.subList(0, k).stream().map(DeviceState::index).sorted().toList(),
                                c.devices().stream().sorted().toList(), "tie-break by candidate order, k=" + k);
                    }
                } catch (GpuAllocationException e) {
                    assertEquals(GpuAllocationException.Reason.INVALID_REQUEST, e.reason(), e.getMessage());
                    assertTrue(e.getMessage() != null && !e.getMessage().isBlank());
                } catch (RuntimeException e) {
                    fail(o + " k=" + k + ": untyped " + e);
                }
            }
        }
    }

    /**
     * {@code gpu.placement.work_budget} reaches the thermal strategy built from the config: on nodes where 1,000 units
     * and the default budget certify differently, the config's thermal strategy (no metrics: the base decides)
     * answers what the 1,000-unit topology strategy answers.
     */
    @Test
    void theConfiguredBudgetReachesThermal() {
        io.gpusched.core.GpuConfig cfg = io.gpusched.core.GpuConfig.parse(
                "gpu:\n  strategy: thermal\n  placement: {work_budget: 1000}\n", "review23.yaml");
        AllocationStrategy thermal = io.gpusched.core.AllocationStrategies.fromConfig(cfg);
        Random r = new Random(2317);
        int differing = 0;
        for (int round = 0; round < 40 && differing < 3; round++) {
            Node node = node(r, Shape.RANDOM, 48 + r.nextInt(16), 4);
            GpuRequest req = GpuRequest.builder().count(node.view().candidates().size() / 3).build();
            Choice small = new TopologyAwareStrategy(Objective.SET, 1_000).choose(req, node.view());
            Choice dflt = new TopologyAwareStrategy(Objective.SET).choose(req, node.view());
            if (small.quality().equals(dflt.quality()) && small.devices().equals(dflt.devices())) {
                continue;
            }
            differing++;
            Choice viaCfg = thermal.choose(req, node.view());
            assertEquals(small.quality(), viaCfg.quality(), node.what());
            assertEquals(new java.util.TreeSet<>(small.devices()), new java.util.TreeSet<>(viaCfg.devices()),
                    node.what());
        }
        assertTrue(differing > 0, "no node where 1,000 units and the default budget differ: nothing was checked");
    }
}
