package io.gpusched.core.adversarial.topology;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusched.core.AllocationStrategy.Choice;
import io.gpusched.core.DeviceState;
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
import java.math.RoundingMode;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.Callable;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Certificates on nodes too large for a brute force (128 to 1,024 devices, a quarter held with heavy links to mislead
 * any bound that counts them) where the optimum is known by construction: a planted set of k free devices that is the
 * unique best for the objective. SET: the planted devices have 4 links among them (410 a pair) and every other pair
 * of free devices at most 2 (260), so any other k-set scores less. REMAINING: the planted devices reach every other
 * free device with no link at the lowest PCIe level (10), every other pair of free devices weighs at least 20, so
 * taking the planted set cuts the least (k != free - k keeps it unique). For every answer at budgets 1,000, 4,096
 * and the default: a valid set; "proven optimal" must be the planted set; "within X %" must hold against the known
 * optimum; the same with one planted device required (the optimum is unchanged).
 */
@Tag("adversarial")
class PlantedOptimumCertificateTest {

    static final AtomicInteger proven = new AtomicInteger();
    static final AtomicInteger within = new AtomicInteger();
    /** Answers at the default budget below 99 % of the planted optimum (reported, not asserted: no documented floor). */
    static final List<String> poorAtDefault = new CopyOnWriteArrayList<>();

    @AfterAll
    static void counts() {
        System.out.println("planted-optimum certificates checked: proven optimal " + proven + ", within X % " + within);
        System.out.println("answers at the default budget under 99 % of the planted optimum: " + poorAtDefault.size());
        poorAtDefault.forEach(System.out::println);
    }

    record Planted(SchedulingView view, Set<Integer> optimum, String what) {
    }

    static Planted planted(Objective o, int n, int k, long seed, int scale) {
        Random r = new Random(seed);
        List<GpuDevice> devs = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            devs.add(SubsetOracle.device(i));
        }
        boolean[] held = new boolean[n];
        List<Integer> free = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            held[i] = r.nextInt(4) == 0;
            if (!held[i]) {
                free.add(i);
            }
        }
        Collections.shuffle(free, r);
        Set<Integer> opt = new TreeSet<>(free.subList(0, k));
        PcieLevel[] levels = PcieLevel.values();
        GpuTopology.Builder b = GpuTopology.builder(devs);
        for (int i = 0; i < n; i++) {
            for (int j = i + 1; j < n; j++) {
                int links;
                PcieLevel lvl;
                if (held[i] || held[j]) {
                    links = scale > 1 ? Integer.MAX_VALUE - r.nextInt(1000) : 20 + r.nextInt(30); // heavy, but never free: a bound that counts them lies high
                    lvl = PcieLevel.INTERNAL;
                } else if (o == Objective.SET) {
                    boolean in = opt.contains(i) && opt.contains(j);
                    links = in ? 4 * scale : r.nextInt(3) == 0 ? (1 + r.nextInt(2)) * scale - r.nextInt(scale) : 0;
                    lvl = in ? PcieLevel.SYSTEM : levels[r.nextInt(levels.length)];
                } else {
                    boolean cross = opt.contains(i) != opt.contains(j);
                    links = cross ? 0 : r.nextInt(3) == 0 ? (1 + r.nextInt(3)) * scale - r.nextInt(scale) : 0;
                    // INTERNAL..NODE (>= 20) for every non-cross pair; SYSTEM (10) for the cross ones
                    lvl = cross ? PcieLevel.SYSTEM : levels[r.nextInt(levels.length - 1)];
                }
                b.links(i, j, links).pcie(i, j, lvl);
            }
        }
        assertEquals(PcieLevel.SYSTEM, levels[levels.length - 1], "SYSTEM is the last (lowest) PCIe level");
        GpuTopology t = b.build();
        List<DeviceState> all = new ArrayList<>();
        List<DeviceState> cands = new ArrayList<>();
        for (GpuDevice d : devs) {
            DeviceState s = held[d.index()] ? SubsetOracle.held(d) : DeviceState.idle(d, GpuHealth.HEALTHY);
            all.add(s);
            if (!held[d.index()]) {
                cands.add(s);
            }
        }
        Collections.shuffle(cands, r);
        return new Planted(SubsetOracle.view(all, cands, t), opt, o + " n=" + n + " free=" + cands.size() + " k="
                + k + " seed=" + seed + " scale=" + scale);
    }

    @ParameterizedTest
    @ValueSource(ints = {128, 256, 512, 1024})
    void aPlantedOptimumIsWhatEveryCertificateIsCheckedAgainst(int n) {
        sweep(n, 1);
    }

    /**
     * The same with link counts scaled by 500,000,000 (planted pairs 2,000,000,000 links, held devices' near
     * {@link Integer#MAX_VALUE}), and a budget of 30,000,000 as well (a user's offline setting: the pool's own rows and
     * many Lagrangian steps fit an eighth of it at these sizes, with shares of about 10^11 moved by rounded steps): on 1,024 devices the sums over the free devices pass 10^17, beyond a double's exact
     * integers, where a bound or a percentage kept in doubles could round below the truth.
     */
    @ParameterizedTest
    @ValueSource(ints = {128, 1024})
    void linkCountsNearTheIntRangeKeepEveryCertificateTrue(int n) {
        sweep(n, 500_000_000);
    }

    /** Every objective and count on its own planted node (seeds in that order), two nodes at a time. */
    static void sweep(int n, int scale) {
        long seed = 2300 + n + scale;
        List<Callable<Void>> nodes = new ArrayList<>();
        for (Objective o : Objective.values()) {
            int[] ks = {2, 3, n / 16, n / 8 + 1, n / 4 + 3};
            for (int k : ks) {
                long s = seed++;
                nodes.add(() -> {
                    sweepOne(o, n, k, s, scale);
                    return null;
                });
            }
        }
        // independent nodes (each with its own strategies; the strategy's budget counts work, not time) judged on the
        // CI machine's two cores; a failure rethrown is the first in the order above
        ExecutorService ex = Executors.newFixedThreadPool(2);
        try {
            List<Future<Void>> fs = new ArrayList<>();
            for (Callable<Void> c : nodes) {
                fs.add(ex.submit(c));
            }
            for (Future<Void> f : fs) {
                try {
                    f.get();
                } catch (ExecutionException e) {
                    if (e.getCause() instanceof Error err) {
                        throw err;
                    }
                    throw new IllegalStateException(e.getCause());
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while the nodes were judged", e);
        } finally {
            ex.shutdownNow();
        }
    }

    /** One planted node: every budget, with and without a planted device required. */
    static void sweepOne(Objective o, int n, int k, long seed, int scale) {
        Planted p = planted(o, n, k, seed, scale);
        int free = p.view().candidates().size();
        if (o == Objective.REMAINING && 2 * k == free) {
            return; // the planted set and its complement would tie
        }
        BigInteger opt = SubsetOracle.key(o, p.view(), new ArrayList<>(p.optimum()))[0];
        long[] budgets = scale == 1 ? new long[]{1_000, 4_096, TopologyAwareStrategy.DEFAULT_WORK_BUDGET}
                : new long[]{1_000, TopologyAwareStrategy.DEFAULT_WORK_BUDGET, 30_000_000};
        for (long budget : budgets) {
            GpuRequest req = GpuRequest.builder().count(k).build();
            Choice c = new TopologyAwareStrategy(o, budget).choose(req, p.view());
            String where = p.what() + " budget=" + budget + ": got " + new TreeSet<>(c.devices()) + " "
                    + c.quality().describe() + "; planted " + p.optimum();
            assertNull(SubsetOracle.invalid(p.view(), k, List.of(), c.devices()), where);
            BigInteger got = check(o, p, opt, c, where);
            // the same with one planted device required: the optimum is unchanged
            int must = p.optimum().iterator().next();
            Choice cr = new TopologyAwareStrategy(o, budget).choose(GpuRequest.builder().count(k)
                    .requiredDevices(List.of(must)).build(), p.view());
            String whereR = where + " | required [" + must + "]: got " + new TreeSet<>(cr.devices()) + " "
                    + cr.quality().describe();
            assertNull(SubsetOracle.invalid(p.view(), k, List.of(must), cr.devices()), whereR);
            check(o, p, opt, cr, whereR);
            if (budget == TopologyAwareStrategy.DEFAULT_WORK_BUDGET
                    && got.multiply(BigInteger.valueOf(100))
                            .compareTo(opt.multiply(BigInteger.valueOf(99))) < 0) {
                poorAtDefault.add("  " + p.what() + ": " + new BigDecimal(got).divide(new BigDecimal(opt), 4,
                        RoundingMode.HALF_UP) + " of the optimum, " + c.quality().describe());
            }
        }
    }

    /** @return the answer's key (the first part), for the caller to use again (a key sums every free pair) */
    static BigInteger check(Objective o, Planted p, BigInteger opt, Choice c, String where) {
        PlacementQuality q = c.quality();
        assertTrue(q.rated(), where);
        BigInteger got = SubsetOracle.key(o, p.view(), c.devices())[0];
        assertTrue(got.compareTo(opt) <= 0, "beats the planted optimum?! " + where);
        if (q.provenOptimal()) {
            proven.incrementAndGet();
            assertEquals(opt, got, "claims proven optimal: " + where);
            assertEquals(p.optimum(), new HashSet<>(c.devices()), "the unique optimum: " + where);
        } else {
            within.incrementAndGet();
            double x = q.withinPercent();
            assertTrue(x >= 0 && x <= 100, where);
            // got >= opt x (1 - x/100): 100 got >= (100 - x) opt
            BigDecimal lhs = new BigDecimal(got).multiply(BigDecimal.valueOf(100));
            // a relative slack of 1e-9: the percentage is a double (a claim equal to the true gap may round below it)
            BigDecimal rhs = new BigDecimal(opt).multiply(BigDecimal.valueOf(100).subtract(new BigDecimal(x)))
                    .multiply(BigDecimal.ONE.subtract(new BigDecimal("1e-9")));
            assertTrue(lhs.compareTo(rhs) >= 0, "claims within " + x + " % of optimal " + opt + " with " + got
                    + " (true gap " + new BigDecimal(opt.subtract(got)).multiply(BigDecimal.valueOf(100))
                            .divide(new BigDecimal(opt), 4, RoundingMode.HALF_UP)
                    + " %): " + where);
        }
        return got;
    }
}
