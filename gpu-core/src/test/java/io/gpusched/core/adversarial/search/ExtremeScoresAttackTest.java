package io.gpusched.core.adversarial.search;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.fail;

import io.gpusched.core.DeviceState;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.PcieLevel;
import io.gpusched.core.SchedulingView;
import io.gpusched.core.strategy.TopologyAwareStrategy.Objective;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Disabled;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Link counts far beyond any machine (the builder accepts any count >= 0): the strategy folds its objective and
 * tie-breaks into one long by weights; these tries check the folding never wraps around silently.
 */
class ExtremeScoresAttackTest {

    static SchedulingView node(Random r, int n, int maxLinks, List<GpuDevice> devs) {
        for (int i = 0; i < n; i++) {
            devs.add(SearchOracle.device(i, i * 2 / n));
        }
        GpuTopology.Builder b = GpuTopology.builder(devs);
        for (int i = 0; i < n; i++) {
            for (int j = i + 1; j < n; j++) {
                b.links(i, j, r.nextInt(maxLinks + 1));
                b.pcie(i, j, PcieLevel.values()[r.nextInt(PcieLevel.values().length)]);
            }
        }
        List<DeviceState> all = new ArrayList<>();
        for (GpuDevice d : devs) {
            all.add(DeviceState.idle(d, GpuHealth.HEALTHY));
        }
        return SearchOracle.view(all, all, b.build());
    }

    static void corpus(Objective o, int[] maxLinks, int tries, int nLo, int nHi, int kLo, int kHi) {
        for (int m : maxLinks) {
            Random r = new Random(4242 + m);
            for (int tr = 0; tr < tries; tr++) {
                int n = nLo + r.nextInt(nHi - nLo + 1);
                int k = kLo + r.nextInt(kHi - kLo + 1);
                SchedulingView v = node(r, n, m, new ArrayList<>());
                GpuRequest req = GpuRequest.builder().count(k).build();
                TightBoundAttackTest.judge("max links " + m + " try " + tr, o, req, v);
            }
        }
    }

    /**
     * Up to 100,000 links per pair (5,000 times an 18-link NVLink pair), 18 to 22 GPUs, k 8 to 11, 20 nodes per
     * level: every answer valid and at the brute force's optimum. Holds.
     */
    @ParameterizedTest
    @EnumSource(Objective.class)
    void linkCountsUpToOneHundredThousandHold(Objective o) {
        corpus(o, new int[] {1_000, 10_000, 100_000}, 20, 18, 22, 8, 11);
    }

    /**
     * Millions of links per pair (pair scores still ints): 6 to 12 GPUs, k 2 to 5, 40 nodes per level. The folded
     * key wraps: at 2,000,000 links, try 10 (k=5, 10 GPUs) SET answers [0, 1, 2, 4, 6] (set score 1,453,292,830) where
     * [0, 1, 2, 4, 5] scores 1,483,186,400, and REMAINING answers [3, 4, 5, 7, 8] where [0, 1, 2, 6, 9] ties it on the
     * first key and wins on the second; at 4,000,000 links (REMAINING, k=4, 7 GPUs, try 0) the answer is [0, 0, 0, 0],
     * not even distinct. On nodes of 18 to 22 GPUs with k 8 to 11 it already breaks at 300,000 links (SET).
     */
    @Disabled("defect: link counts of millions (GpuTopology.Builder accepts any count >= 0) overflow the long the "
            + "search folds its keys into: non-optimal sets (SET) and duplicate indices such as [0, 0, 0, 0] "
            + "(REMAINING); see fourGpusTwentyOneMillionLinks for the smallest case")
    @ParameterizedTest
    @EnumSource(Objective.class)
    void linkCountsOfMillionsDoNotWrap(Objective o) {
        corpus(o, new int[] {1_000_000, 2_000_000, 4_000_000, 10_000_000}, 40, 6, 12, 2, 5);
    }

    /**
     * Four GPUs: 0-1 and 1-2 carry 21,000,000 links each (pair score 2,100,000,060 and 2,100,000,010, both ints), 2-3
     * one link, the rest none. The best pair by any reading of either objective is {0, 1}.
     */
    @Disabled("defect: 4 GPUs, links 0-1 and 1-2 21,000,000 each, 2-3 one: k=2 gives [2, 3] (SET) and [0, 0] "
            + "(REMAINING, duplicate index) where [0, 1] is best")
    @ParameterizedTest
    @EnumSource(Objective.class)
    void fourGpusTwentyOneMillionLinks(Objective o) {
        List<GpuDevice> devs = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            devs.add(SearchOracle.device(i, 0));
        }
        GpuTopology t = GpuTopology.builder(devs).links(0, 1, 21_000_000).pcie(0, 1, PcieLevel.INTERNAL)
                .links(1, 2, 21_000_000).pcie(1, 2, PcieLevel.SYSTEM).links(2, 3, 1).build();
        List<DeviceState> all = new ArrayList<>();
        for (GpuDevice d : devs) {
            all.add(DeviceState.idle(d, GpuHealth.HEALTHY));
        }
        SchedulingView v = SearchOracle.view(all, all, t);
        GpuRequest req = GpuRequest.builder().count(2).build();
        assertEquals(List.of(0, 1), SearchOracle.best(o, req, v).set());
        assertEquals(List.of(0, 1), SearchOracle.sorted(new io.gpusched.core.strategy.TopologyAwareStrategy(o).select(req, v)));
    }
}
