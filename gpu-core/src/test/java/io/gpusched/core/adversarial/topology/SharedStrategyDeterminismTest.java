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
import io.gpusched.core.SchedulingView;
import io.gpusched.core.strategy.TopologyAwareStrategy;
import io.gpusched.core.strategy.TopologyAwareStrategy.Objective;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The work budget is documented as deterministic ("Every search spends at most its work budget ... deterministic, set-up
 * included"), and since issue 23 one strategy instance decides for every thread of a scheduler outside its lock. So the
 * same request on the same view must get the same devices and the same certificate whatever the strategy instance
 * computed before (its per-topology caches warm or cold), and whichever threads ask at the same time (the caches of its
 * last 8 topologies churned by 10 topologies).
 */
@Tag("adversarial")
class SharedStrategyDeterminismTest {

    static SchedulingView irregular(int n, long seed) {
        Random r = new Random(seed);
        List<GpuDevice> devs = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            devs.add(SubsetOracle.device(i));
        }
        PcieLevel[] levels = PcieLevel.values();
        GpuTopology.Builder b = GpuTopology.builder(devs);
        for (int i = 0; i < n; i++) {
            for (int j = i + 1; j < n; j++) {
                b.links(i, j, r.nextInt(3) == 0 ? 1 + r.nextInt(4) : 0).pcie(i, j, levels[r.nextInt(levels.length)]);
            }
        }
        GpuTopology t = b.build();
        List<DeviceState> all = new ArrayList<>();
        List<DeviceState> cands = new ArrayList<>();
        for (GpuDevice d : devs) {
            boolean held = r.nextInt(4) == 0;
            DeviceState s = held ? SubsetOracle.held(d) : DeviceState.idle(d, GpuHealth.HEALTHY);
            all.add(s);
            if (!held) {
                cands.add(s);
            }
        }
        Collections.shuffle(cands, r);
        return SubsetOracle.view(all, cands, t);
    }

    static String answer(Choice c) {
        return c.devices() + " " + c.quality();
    }

    @Test
    void aWarmStrategyAnswersAsAFreshOne() {
        int unproven = 0;
        for (int n : new int[]{256, 1024}) {
            SchedulingView v = irregular(n, 2326 + n);
            for (Objective o : Objective.values()) {
                for (int k : new int[]{n / 16, n / 8}) {
                    GpuRequest req = GpuRequest.builder().count(k).build();
                    Choice freshChoice = new TopologyAwareStrategy(o).choose(req, v);
                    unproven += freshChoice.quality().provenOptimal() ? 0 : 1;
                    String fresh = answer(freshChoice);
                    TopologyAwareStrategy warm = new TopologyAwareStrategy(o);
                    String first = answer(warm.choose(req, v));
                    warm.choose(GpuRequest.builder().count(2).build(), v);
                    warm.choose(GpuRequest.builder().count(n / 4).build(), v);
                    String again = answer(warm.choose(req, v));
                    String where = o + " n=" + n + " k=" + k;
                    assertEquals(fresh, first, "two fresh strategies: " + where);
                    assertEquals(fresh, again, "the same strategy after other requests on this topology: " + where);
                }
            }
        }
        assertTrue(unproven > 0, "no search ran out of its budget: nothing tested");
    }

    /**
     * Since round 3 a strategy lends its search tables from one call to the next ({@code SearchScratch}): a strategy
     * that just searched a 1,024-device node (large tables, other contents) answers a small node, then a mid-size one,
     * then the large one again, exactly as fresh strategies do, for both objectives and budgets that run out.
     */
    @Test
    void aStrategyThatSearchedOtherSizesAnswersAsAFreshOne() {
        int[] sizes = {1024, 24, 256, 40, 1024, 96, 512, 24};
        List<SchedulingView> views = new ArrayList<>();
        for (int i = 0; i < sizes.length; i++) {
            views.add(irregular(sizes[i], 2330 + i % 4)); // sizes 24 and 1024 repeat with the same seed: same node
        }
        for (Objective o : Objective.values()) {
            for (long budget : new long[]{5_000, TopologyAwareStrategy.DEFAULT_WORK_BUDGET}) {
                TopologyAwareStrategy shared = new TopologyAwareStrategy(o, budget);
                for (int i = 0; i < sizes.length; i++) {
                    SchedulingView v = views.get(i);
                    int free = v.candidates().size();
                    for (int k : new int[]{2, Math.max(3, free / 8), Math.max(4, free / 3)}) {
                        GpuRequest req = GpuRequest.builder().count(k).build();
                        String alone = answer(new TopologyAwareStrategy(o, budget).choose(req, v));
                        String after = answer(shared.choose(req, v));
                        assertEquals(alone, after, o + " budget " + budget + " n=" + sizes[i] + " (call " + i
                                + " of the shared strategy) k=" + k);
                    }
                }
            }
        }
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void eightThreadsOnOneStrategyGetTheSingleThreadedAnswers() throws Exception {
        int nodes = 10; // more than the 8 topologies a strategy keeps
        List<SchedulingView> views = new ArrayList<>();
        for (int i = 0; i < nodes; i++) {
            views.add(irregular(48 + 16 * i, 2327 + i));
        }
        int[] ks = {2, 5, 12};
        String[][] reference = new String[nodes][ks.length];
        for (int i = 0; i < nodes; i++) {
            for (int j = 0; j < ks.length; j++) {
                reference[i][j] = answer(new TopologyAwareStrategy(Objective.SET)
                        .choose(GpuRequest.builder().count(ks[j]).build(), views.get(i)));
            }
        }
        TopologyAwareStrategy shared = new TopologyAwareStrategy(Objective.SET);
        ExecutorService pool = Executors.newFixedThreadPool(8);
        List<Future<String>> fs = new ArrayList<>();
        for (int t = 0; t < 8; t++) {
            int thread = t;
            fs.add(pool.submit(() -> {
                Random r = new Random(thread);
                for (int call = 0; call < 60; call++) {
                    int i = r.nextInt(nodes);
                    int j = r.nextInt(ks.length);
                    Choice c = shared.choose(GpuRequest.builder().count(ks[j]).build(), views.get(i));
                    String bad = SubsetOracle.invalid(views.get(i), ks[j], List.of(), c.devices());
                    if (bad != null) {
                        return "node " + i + " k=" + ks[j] + ": " + bad;
                    }
                    if (!answer(c).equals(reference[i][j])) {
                        return "node " + i + " k=" + ks[j] + ": " + answer(c) + " vs alone " + reference[i][j];
                    }
                }
                return null;
            }));
        }
        for (Future<String> f : fs) {
            assertNull(f.get(100, TimeUnit.SECONDS));
        }
        pool.shutdown();
    }
}
