package io.gpusched.core.adversarial.topology;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

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
import io.gpusched.core.strategy.TopologyAwareStrategy;
import io.gpusched.core.strategy.TopologyAwareStrategy.Objective;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Certificates against {@link SubsetOracle}'s brute force on small nodes (14 to 20 devices) built to trap a greedy
 * start and its swaps, and with budgets at the edges of their range: the smallest (1,000), one above, a little, and
 * the largest values short of {@link TopologyAwareStrategy#EXACT} (where "work + cost > budget" or "budget / 8" style
 * arithmetic could overflow). Shapes: a heavy pair far from a heavier clique (the best pair is in no best larger set),
 * a hub linked to everyone (best affinity, no partner), two equal cliques (ties to the candidate order), a chain with
 * rising weights, link counts near the int range on a quarter of the pairs and 0-3 on the rest. "Proven optimal" must equal the brute force's whole key (tie-breaks included, as the Javadoc says);
 * "within X %" must hold for the primary key.
 */
@Tag("adversarial")
class DeceptiveNodesCertificateTest {

    static final long[] BUDGETS = {1_000, 1_001, 3_000, 10_000, 40_000, 150_000, Long.MAX_VALUE / 2 + 1,
        Long.MAX_VALUE - 1,
        TopologyAwareStrategy.EXACT};
    static int proven;
    static int within;

    @AfterAll
    static void counts() {
        System.out.println("deceptive-node certificates checked against the brute force: proven optimal " + proven
                + ", within X % " + within);
    }

    enum Shape { FAR_HEAVY_PAIR, HUB, TWIN_CLIQUES, RISING_CHAIN, HUGE_AND_TINY }

    static SchedulingView node(Shape shape, Random r, int n) {
        List<GpuDevice> devs = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            devs.add(SubsetOracle.device(i));
        }
        GpuTopology.Builder b = GpuTopology.builder(devs);
        PcieLevel[] levels = PcieLevel.values();
        for (int i = 0; i < n; i++) {
            for (int j = i + 1; j < n; j++) {
                int links;
                PcieLevel lvl = levels[r.nextInt(levels.length)];
                switch (shape) {
                    case FAR_HEAVY_PAIR -> {
                        if (i == 0 && j == 1) {
                            links = 30; // the single best pair
                        } else if (i >= 2 && j < 2 + n / 3) {
                            links = 12; // a clique of n/3 devices, each pair lighter than (0, 1)
                        } else {
                            links = r.nextInt(4) == 0 ? 1 : 0;
                        }
                    }
                    case HUB -> links = i == 0 ? 9 : r.nextInt(3) == 0 ? 2 + r.nextInt(6) : 0;
                    case TWIN_CLIQUES -> {
                        int h = n / 2;
                        links = (i < h) == (j < h) ? 6 : r.nextInt(5) == 0 ? 1 : 0;
                        lvl = (i < h) == (j < h) ? PcieLevel.SINGLE : PcieLevel.SYSTEM;
                    }
                    case HUGE_AND_TINY -> // near the int range on a few pairs, 0-3 elsewhere: the Lagrangian's shares
                        links = r.nextInt(4) == 0 ? Integer.MAX_VALUE - r.nextInt(1_000_000) : r.nextInt(4);
                    default -> {
                        links = j == i + 1 ? 1 + i : r.nextInt(6) == 0 ? 1 : 0;
                    }
                }
                b.links(i, j, links).pcie(i, j, lvl);
            }
        }
        GpuTopology t = b.build();
        List<DeviceState> all = new ArrayList<>();
        List<DeviceState> cands = new ArrayList<>();
        for (GpuDevice d : devs) {
            boolean held = r.nextInt(5) == 0;
            DeviceState s = held ? SubsetOracle.held(d) : DeviceState.idle(d, GpuHealth.HEALTHY);
            all.add(s);
            if (!held) {
                cands.add(s);
            }
        }
        Collections.shuffle(cands, r);
        return SubsetOracle.view(all, cands, t);
    }

    @ParameterizedTest
    @EnumSource(Shape.class)
    void everyCertificateHoldsOnNodesThatTrapAGreedySearch(Shape shape) {
        Random r = new Random(2325 + shape.ordinal());
        int checked = 0;
        for (int round = 0; round < 6; round++) {
            int n = 14 + r.nextInt(7);
            SchedulingView v = node(shape, r, n);
            List<Integer> cands = SubsetOracle.indices(v.candidates());
            int f = cands.size();
            for (int k : new int[]{1, 2, 3, 4, f / 3, f / 2, f - 1, f}) {
                if (k < 1 || k > f || subsets(f, k) > 60_000) {
                    continue;
                }
                List<Integer> required = round % 2 == 1 && k >= 2 ? List.of(cands.get(r.nextInt(f))) : List.of();
                GpuRequest.Builder rb = GpuRequest.builder().count(k);
                if (!required.isEmpty()) {
                    rb.requiredDevices(required);
                }
                GpuRequest req = rb.build();
                for (Objective o : Objective.values()) {
                    BigInteger[] best = SubsetOracle.best(o, v, k, required);
                    for (long budget : BUDGETS) {
                        Choice c;
                        try {
                            c = new TopologyAwareStrategy(o, budget).choose(req, v);
                        } catch (GpuAllocationException e) {
                            throw new AssertionError(shape + " n=" + n + " k=" + k + " budget=" + budget + ": " + e, e);
                        }
                        String where = shape + " n=" + n + " free=" + f + " k=" + k + " required=" + required + " "
                                + o + " budget=" + budget + ": got " + c.devices() + " " + c.quality().describe();
                        assertNull(SubsetOracle.invalid(v, k, required, c.devices()), where);
                        check(o, v, best, c, where);
                        checked++;
                        if (budget == TopologyAwareStrategy.EXACT) {
                            assertTrue(c.quality().provenOptimal(), "EXACT must prove its answer: " + where);
                        }
                    }
                }
            }
        }
        assertTrue(checked > 100, "checked " + checked);
    }

    static void check(Objective o, SchedulingView v, BigInteger[] best, Choice c, String where) {
        PlacementQuality q = c.quality();
        assertTrue(q.rated(), where);
        BigInteger[] got = SubsetOracle.key(o, v, c.devices());
        if (q.provenOptimal()) {
            proven++;
            assertArrayEquals(best, got, "claims proven optimal (tie-breaks included): " + where + "; brute force "
                    + Arrays.toString(best) + " vs " + Arrays.toString(got));
        } else {
            within++;
            double x = q.withinPercent();
            assertTrue(x >= 0 && x <= 100, where);
            BigDecimal lhs = new BigDecimal(got[0]).multiply(BigDecimal.valueOf(100));
            // exact: the claimed percentage (a double) is rounded up, so a claim equal to the true gap holds as is
            BigDecimal rhs = new BigDecimal(best[0]).multiply(BigDecimal.valueOf(100).subtract(new BigDecimal(x)));
            assertTrue(lhs.compareTo(rhs) >= 0, "claims within " + x + " %: optimum " + best[0] + ", answer "
                    + got[0] + ": " + where);
        }
        assertEquals(q.provenOptimal(), q.describe().contains("optimal") && !q.describe().contains("within"),
                "describe() says what the quality is: " + q.describe());
    }

    static long subsets(int n, int k) {
        long c = 1;
        for (int i = 0; i < k; i++) {
            c = c * (n - i) / (i + 1);
        }
        return c;
    }
}
