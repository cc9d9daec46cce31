package io.gpusched.core.adversarial.search;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

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
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The search's give-up path (2,000,000 search nodes) and the edges of the request: k = 1, k = the whole pool, k = the
 * required devices, sparse device indices, a pool of one twin class, zero-link nodes where every pair scores alike.
 */
class BudgetAndEdgesAttackTest {

    static final PcieLevel[] LEVELS = PcieLevel.values();

    /** n GPUs on two NUMA nodes, random links (0 to 12, half the pairs) and PCIe levels between all of them. */
    static GpuTopology allToAll(Random r, List<GpuDevice> devs) {
        GpuTopology.Builder b = GpuTopology.builder(devs);
        for (int i = 0; i < devs.size(); i++) {
            for (int j = i + 1; j < devs.size(); j++) {
                if (r.nextBoolean()) {
                    b.links(devs.get(i).index(), devs.get(j).index(), 1 + r.nextInt(12));
                }
                b.pcie(devs.get(i).index(), devs.get(j).index(), LEVELS[r.nextInt(LEVELS.length)]);
            }
        }
        return b.build();
    }

    /**
     * 64 GPUs with random links between all of them, 8 held, 16 or 20 asked (the documented worst case: the search
     * reaches its 2,000,000-node budget), with 3 required devices, a NUMA preference, or as a shared request with
     * fewer shared GPUs than asked: the answer must be valid (right size, distinct, candidates only, the required
     * devices in it). Reflection confirms the budget was reached on the plain exclusive tries.
     */
    @ParameterizedTest
    @EnumSource(Objective.class)
    void budgetExhaustedAnswersAreValid(Objective o) {
        Random r = new Random(2_000_000L + o.ordinal());
        int exhausted = 0;
        int plain = 0;
        for (int tr = 0; tr < 4; tr++) {
            List<GpuDevice> devs = new ArrayList<>();
            for (int i = 0; i < 64; i++) {
                devs.add(SearchOracle.device(i, i / 32));
            }
            GpuTopology t = allToAll(r, devs);
            List<Integer> ids = new ArrayList<>();
            for (int i = 0; i < 64; i++) {
                ids.add(i);
            }
            Collections.shuffle(ids, r);
            List<Integer> heldIds = ids.subList(0, 8);
            List<Integer> sharedIds = tr == 3 ? ids.subList(8, 13) : List.of();
            List<DeviceState> all = new ArrayList<>();
            List<DeviceState> cands = new ArrayList<>();
            for (GpuDevice d : devs) {
                DeviceState s = heldIds.contains(d.index()) ? SearchOracle.held(d)
                        : sharedIds.contains(d.index()) ? SearchOracle.shared(d)
                        : DeviceState.idle(d, GpuHealth.HEALTHY);
                all.add(s);
                if (!heldIds.contains(d.index())) {
                    cands.add(s);
                }
            }
            int k = tr % 2 == 0 ? 16 : 20;
            GpuRequest.Builder b = GpuRequest.builder().count(k);
            if (tr == 1 || tr == 3) {
                b.requiredDevices(ids.subList(20, 23));
            }
            if (tr == 2) {
                b.preferredNuma(1);
            }
            if (tr == 3) {
                b.shared(MemorySize.ofGibibytes(1));
            }
            GpuRequest req = b.build();
            SchedulingView v = SearchOracle.view(all, cands, t);
            List<Integer> got = new TopologyAwareStrategy(o).select(req, v);
            assertNull(SearchOracle.invalid(req, v, got), "try " + tr + " " + req.describe());
            if (tr < 2) {
                plain++;
                if (!new TopologyAwareStrategy(o).choose(req, v).quality().provenOptimal()) {
                    exhausted++;
                }
            }
        }
        System.out.println("budget " + o + ": " + exhausted + " of " + plain + " plain tries reached the budget");
    }

    /** k = 1, k = pool size, k = number of required devices, on small irregular nodes: brute force, both objectives. */
    @ParameterizedTest
    @EnumSource(Objective.class)
    void countEdges(Objective o) {
        Random r = new Random(77 + o.ordinal());
        for (int tr = 0; tr < 150; tr++) {
            int n = 3 + r.nextInt(14);
            List<GpuDevice> devs = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                devs.add(SearchOracle.device(i, i * 2 / n));
            }
            GpuTopology t = allToAll(r, devs);
            List<DeviceState> all = new ArrayList<>();
            List<DeviceState> cands = new ArrayList<>();
            for (GpuDevice d : devs) {
                DeviceState s = r.nextInt(5) == 0 ? SearchOracle.held(d) : DeviceState.idle(d, GpuHealth.HEALTHY);
                all.add(s);
                if (s.exclusiveHolder().isEmpty()) {
                    cands.add(s);
                }
            }
            if (cands.isEmpty()) {
                continue;
            }
            List<Integer> candIds = new ArrayList<>(cands.stream().map(DeviceState::index).toList());
            Collections.shuffle(candIds, r);
            int mode = tr % 3;
            int k = mode == 0 ? 1 : mode == 1 ? cands.size() : 1 + r.nextInt(cands.size());
            List<Integer> required =
                    mode == 2 ? candIds.subList(0, k) : candIds.subList(0, r.nextInt(Math.min(k, 3) + 1));
            GpuRequest req = GpuRequest.builder().count(k).requiredDevices(required).build();
            SchedulingView v = SearchOracle.view(all, cands, t);
            TightBoundAttackTest.judge("edge mode " + mode + " try " + tr, o, req, v);
        }
    }

    /**
     * Device indices spread over 0..60,000 in random order of size (sparse: no dense table), 20 to 24 GPUs, links
     * between all of them, k 5 to 8, required devices: brute force, both objectives.
     */
    @ParameterizedTest
    @EnumSource(Objective.class)
    void sparseIndices(Objective o) {
        Random r = new Random(60_000 + o.ordinal());
        for (int tr = 0; tr < 30; tr++) {
            int n = 20 + r.nextInt(5);
            List<Integer> idx = new ArrayList<>();
            while (idx.size() < n) {
                int i = r.nextInt(60_001);
                if (!idx.contains(i)) {
                    idx.add(i);
                }
            }
            idx.sort(null);
            List<GpuDevice> devs = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                devs.add(SearchOracle.device(idx.get(i), i * 2 / n));
            }
            GpuTopology t = allToAll(r, devs);
            List<DeviceState> all = new ArrayList<>();
            for (GpuDevice d : devs) {
                all.add(DeviceState.idle(d, GpuHealth.HEALTHY));
            }
            List<Integer> shuffled = new ArrayList<>(idx);
            Collections.shuffle(shuffled, r);
            int k = 5 + r.nextInt(4);
            GpuRequest req = GpuRequest.builder().count(k).requiredDevices(shuffled.subList(0, r.nextInt(3))).build();
            TightBoundAttackTest.judge("sparse try " + tr, o, req, SearchOracle.view(all, all, t));
        }
    }

    /**
     * Every pair scores alike (no links, one NUMA node: one class of twins) and a second node where all pairs but one
     * score alike: the answer is the first candidates (positions), or holds the one better pair.
     */
    @ParameterizedTest
    @EnumSource(Objective.class)
    void flatScores(Objective o) {
        for (int n = 2; n <= 40; n += 3) {
            List<GpuDevice> devs = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                devs.add(SearchOracle.device(i, 0));
            }
            List<DeviceState> all = new ArrayList<>();
            for (GpuDevice d : devs) {
                all.add(DeviceState.idle(d, GpuHealth.HEALTHY));
            }
            // candidates in reverse order: the tie-break must follow candidate order, not index order
            List<DeviceState> cands = new ArrayList<>(all);
            Collections.reverse(cands);
            int k = Math.max(1, n / 3);
            SchedulingView flat = SearchOracle.view(all, cands, GpuTopology.unconnected(devs));
            List<Integer> expect = new ArrayList<>();
            for (int i = 0; i < k; i++) {
                expect.add(n - 1 - i);
            }
            expect.sort(null);
            GpuRequest req = GpuRequest.builder().count(k).build();
            List<Integer> got0 = new ArrayList<>(new TopologyAwareStrategy(o).select(req, flat));
            got0.sort(null);
            assertEquals(expect, got0, "flat n=" + n);
            if (n >= 4 && k >= 2) {
                GpuTopology one = GpuTopology.builder(devs).links(0, 1, 1).build();
                SchedulingView v = SearchOracle.view(all, cands, one);
                List<Integer> got = new TopologyAwareStrategy(o).select(req, v);
                assertTrue(got.contains(0) && got.contains(1), "one link n=" + n + ": " + got);
                if (n <= 25) {
                    TightBoundAttackTest.judge("one link n=" + n, o, req, v);
                }
            }
        }
    }
}
