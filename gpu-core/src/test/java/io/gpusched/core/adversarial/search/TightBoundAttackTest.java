package io.gpusched.core.adversarial.search;

import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.gpusched.core.DeviceState;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.MemorySize;
import io.gpusched.core.PcieLevel;
import io.gpusched.core.SchedulingView;
import io.gpusched.core.strategy.TopologyAwareStrategy;
import io.gpusched.core.strategy.TopologyAwareStrategy.Objective;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.concurrent.Callable;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Attacks on the branch and bound's tighter bound (commit 818ed4a, built once a search passes 2,048 nodes): searches
 * big enough to pass that threshold (24 to 30 candidates with links between all of them, 5 to 8 GPUs asked), judged by
 * {@link SearchOracle}'s brute force over every subset. A bound that is not an upper bound prunes the optimum and shows
 * here as a key below the brute force's. Each corpus also counts, through SearchProbe, how many of its searches passed
 * 2,048 nodes (so it is known to exercise the tighter bound), and asserts a share.
 */
class TightBoundAttackTest {

    static final PcieLevel[] LEVELS = PcieLevel.values();

    /** How the links of a random node are drawn. */
    interface LinkDraw {
        void draw(Random r, GpuTopology.Builder b, List<GpuDevice> devices);
    }

    static long choose(int n, int k) {
        long c = 1;
        for (int i = 0; i < k; i++) {
            c = c * (n - i) / (i + 1);
        }
        return c;
    }

    /** One try: the strategy's answer must be valid and its key equal to the brute force's best. */
    static boolean judge(String what, Objective o, GpuRequest req, SchedulingView v) {
        return judge(what, o, req, v, true);
    }

    /** {@code stayFree}: which reading of the SET affinity tie-break ({@link SearchOracle#key}). */
    static boolean judge(String what, Objective o, GpuRequest req, SchedulingView v, boolean stayFree) {
        TopologyAwareStrategy s = new TopologyAwareStrategy(o);
        List<Integer> got = s.select(req, v);
        String bad = SearchOracle.invalid(req, v, got);
        if (bad != null) {
            fail(what + ": invalid answer " + bad + " for " + req.describe() + " on " + SearchOracle.describe(
                    v.topology(), v));
        }
        SearchOracle.Best best = SearchOracle.best(o, req, v, stayFree);
        long[] gotKey = SearchOracle.key(req.sharing() == io.gpusched.core.SharingMode.SHARED ? Objective.SET : o, v,
                got, stayFree);
        if (SearchOracle.compare(gotKey, best.key()) != 0) {
            fail(what + " " + o + " k=" + req.count() + " required=" + req.requiredDevices() + ": got " + got + " key "
                    + SearchOracle.str(gotKey) + ", exact best " + best.set() + " key " + SearchOracle.str(best.key())
                    + " (" + best.subsets() + " subsets) on " + SearchOracle.describe(v.topology(), v));
        }
        return true;
    }

    /**
     * Random nodes: n devices on two NUMA nodes, some held exclusively (not candidates), links drawn by {@code links};
     * k from kLo..kHi, 0 to 3 required devices; a third of the tries hand the candidates over in a shuffled order. Returns {tries, tries past 2,048 search nodes}.
     */
    static int[] corpus(String what, Objective o, long seed, int tries, int nLo, int nHi, int kLo, int kHi,
            int maxHeld, LinkDraw links) {
        Random r = new Random(seed);
        int past = 0;
        int done = 0;
        List<Callable<Integer>> work = new ArrayList<>();
        while (done < tries) {
            int n = nLo + r.nextInt(nHi - nLo + 1);
            List<GpuDevice> devs = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                devs.add(SearchOracle.device(i, i * 2 / n));
            }
            GpuTopology.Builder b = GpuTopology.builder(devs);
            links.draw(r, b, devs);
            GpuTopology t = b.build();
            int heldCount = r.nextInt(maxHeld + 1);
            List<Integer> ids = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                ids.add(i);
            }
            Collections.shuffle(ids, r);
            List<Integer> heldIds = ids.subList(0, heldCount);
            List<DeviceState> all = new ArrayList<>();
            List<DeviceState> cands = new ArrayList<>();
            for (GpuDevice d : devs) {
                if (heldIds.contains(d.index())) {
                    all.add(SearchOracle.held(d));
                } else {
                    DeviceState s = DeviceState.idle(d, GpuHealth.HEALTHY);
                    all.add(s);
                    cands.add(s);
                }
            }
            if (r.nextInt(3) == 0) {
                // a composing strategy may hand over its own candidate order: the last tie-break follows it
                Collections.shuffle(cands, r);
            }
            int k = kLo + r.nextInt(kHi - kLo + 1);
            if (choose(cands.size(), k) > 8_000_000L) {
                continue;
            }
            List<Integer> candIds = new ArrayList<>(cands.stream().map(DeviceState::index).toList());
            Collections.shuffle(candIds, r);
            int req = r.nextInt(4);
            GpuRequest request = GpuRequest.builder().count(k).requiredDevices(candIds.subList(0, Math.min(req, k)))
                    .build();
            SchedulingView v = SearchOracle.view(all, cands, t);
            String name = what + " seed " + seed + " try " + done;
            work.add(() -> {
                judge(name, o, request, v);
                return SearchOracle.searchNodes(o, request, v);
            });
            done++;
        }
        // the tries are drawn above, one after another from the seed; judged here two at a time
        for (int nodes : SearchOracle.atOnce(work)) {
            if (nodes < 0) {
                past = Integer.MIN_VALUE / 2;
            } else if (nodes > 2_048) {
                past++;
            }
        }
        return new int[]{done, past};
    }

    /** Links between every two devices: 1 to 12 with probability 1/2, random PCIe level. */
    static void allToAll(Random r, GpuTopology.Builder b, List<GpuDevice> devs) {
        for (int i = 0; i < devs.size(); i++) {
            for (int j = i + 1; j < devs.size(); j++) {
                if (r.nextBoolean()) {
                    b.links(i, j, 1 + r.nextInt(12));
                }
                b.pcie(i, j, LEVELS[r.nextInt(LEVELS.length)]);
            }
        }
    }

    /** Few distinct scores: links 0 or 1 (probability 0.3), PCIe level from the NUMA node (the default): many ties. */
    static void degenerate(Random r, GpuTopology.Builder b, List<GpuDevice> devs) {
        for (int i = 0; i < devs.size(); i++) {
            for (int j = i + 1; j < devs.size(); j++) {
                if (r.nextInt(10) < 3) {
                    b.links(i, j, 1);
                }
            }
        }
    }

    /** Scores from a narrow band: 1 link everywhere, PCIe levels NODE or SYSTEM at random (ties between sums). */
    static void nearlyFlat(Random r, GpuTopology.Builder b, List<GpuDevice> devs) {
        for (int i = 0; i < devs.size(); i++) {
            for (int j = i + 1; j < devs.size(); j++) {
                b.links(i, j, 1);
                b.pcie(i, j, r.nextBoolean() ? PcieLevel.NODE : PcieLevel.SYSTEM);
            }
        }
    }

    /** Every pair 0 to 3 links and a random PCIe level: many near-equal pairs, weak bounds, long searches. */
    static void dense(Random r, GpuTopology.Builder b, List<GpuDevice> devs) {
        for (int i = 0; i < devs.size(); i++) {
            for (int j = i + 1; j < devs.size(); j++) {
                b.links(i, j, r.nextInt(4));
                b.pcie(i, j, LEVELS[r.nextInt(LEVELS.length)]);
            }
        }
    }

    @ParameterizedTest
    @EnumSource(Objective.class)
    void denseLinksLongSearches(Objective o) {
        int[] res = corpus("dense", o, 818_301L + o.ordinal(), 120, 28, 30, 7, 9, 2, TightBoundAttackTest::dense);
        report("dense", o, res);
        assertTrue(res[1] < 0 || res[1] >= res[0] / 4, "too few searches past 2,048 nodes: " + res[1]);
    }

    @ParameterizedTest
    @EnumSource(Objective.class)
    void allToAllRandomLinksPastTheThreshold(Objective o) {
        int[] res = corpus("all-to-all", o, 818_001L + o.ordinal(), 60, 24, 28, 6, 8, 3,
                TightBoundAttackTest::allToAll);
        report("all-to-all", o, res);
    }

    @ParameterizedTest
    @EnumSource(Objective.class)
    void degenerateScoresManyTies(Objective o) {
        int[] res = corpus("degenerate", o, 818_101L + o.ordinal(), 60, 24, 28, 5, 8, 3,
                TightBoundAttackTest::degenerate);
        report("degenerate", o, res);
    }

    @ParameterizedTest
    @EnumSource(Objective.class)
    void nearlyFlatScores(Objective o) {
        int[] res = corpus("nearly-flat", o, 818_201L + o.ordinal(), 60, 24, 28, 5, 8, 3,
                TightBoundAttackTest::nearlyFlat);
        report("nearly-flat", o, res);
    }

    static void report(String what, Objective o, int[] res) {
        System.out.println(what + " " + o + ": " + res[0] + " tries, " + res[1] + " past 2,048 search nodes");
    }
}
