package io.gpusched.core.adversarial.search;

import static org.junit.jupiter.api.Assertions.assertEquals;

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
import java.util.List;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The documented tie-breaks, on small hand-built nodes where the higher keys tie: "the smallest sum of positions in
 * SchedulingView#candidates()" when a NUMA preference narrows the pool, and "the least affinity to the GPUs that stay
 * free" when a shared request's set mixes a GPU already shared with free ones. Each expected set is also the brute
 * force's ({@link SearchOracle}), so the hand reasoning is checked too.
 */
class TieBreakAttackTest {

    /**
     * Ten GPUs; NUMA node 0 holds 0, 6, 7, 8, 9 and node 1 holds 1 to 5 (candidate order is index order). One link
     * 0-9 and one link 6-7, nothing else. k = 2 on NUMA 0: {0, 9} and {6, 7} both score 120 and have the same affinity
     * to what stays free (and the same REMAINING value); candidate positions 0 + 9 = 9 against 6 + 7 = 13, so {0, 9}.
     * Positions counted inside the NUMA-narrowed pool (0 + 4 = 4 against 1 + 2 = 3) would give {6, 7}.
     */
    @ParameterizedTest
    @EnumSource(Objective.class)
    void numaPreferenceTieBreaksByCandidatePositions(Objective o) {
        List<GpuDevice> devs = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
            devs.add(SearchOracle.device(i, i == 0 || i >= 6 ? 0 : 1));
        }
        GpuTopology t = GpuTopology.builder(devs).links(0, 9, 1).links(6, 7, 1).build();
        List<DeviceState> all = new ArrayList<>();
        for (GpuDevice d : devs) {
            all.add(DeviceState.idle(d, GpuHealth.HEALTHY));
        }
        SchedulingView v = SearchOracle.view(all, all, t);
        GpuRequest req = GpuRequest.builder().count(2).preferredNuma(0).build();
        assertEquals(List.of(0, 9), SearchOracle.best(o, req, v).set(), "the brute force's reading");
        assertEquals(List.of(0, 9), SearchOracle.sorted(new TopologyAwareStrategy(o).select(req, v)));
    }

    /**
     * The same node and request without the NUMA preference: the pool is every candidate and the answer is {0, 9}
     * (control: the tie-break by candidate positions works where the pool is the candidate list).
     */
    @ParameterizedTest
    @EnumSource(Objective.class)
    void withoutNumaPreferenceTheTieBreakHolds(Objective o) {
        List<GpuDevice> devs = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
            devs.add(SearchOracle.device(i, i == 0 || i >= 6 ? 0 : 1));
        }
        GpuTopology t = GpuTopology.builder(devs).links(0, 9, 1).links(6, 7, 1).build();
        List<DeviceState> all = new ArrayList<>();
        List<DeviceState> cands = new ArrayList<>();
        for (GpuDevice d : devs) {
            DeviceState s = DeviceState.idle(d, GpuHealth.HEALTHY);
            all.add(s);
            if (d.index() == 0 || d.index() >= 6) {
                cands.add(s);
            }
        }
        // candidates are exactly NUMA 0's GPUs: positions 0..4, so {6, 7} (1 + 2) beats {0, 9} (0 + 4)
        SchedulingView v = SearchOracle.view(all, cands, t);
        GpuRequest req = GpuRequest.builder().count(2).build();
        assertEquals(List.of(6, 7), SearchOracle.best(o, req, v).set(), "the brute force's reading");
        assertEquals(List.of(6, 7), SearchOracle.sorted(new TopologyAwareStrategy(o).select(req, v)));
    }

    /**
     * Four GPUs on one NUMA node; GPU 0 already shared. Links 0-1 and 1-2 (pair score 120 each), PCIe SINGLE on 2-3
     * (50), every other pair 20. A shared request for 2 GPUs (fewer than 2 shared GPUs, so the pool is all four): {0, 1}
     * and {1, 2} both score 120. Affinity to the GPUs that stay free: {0, 1} leaves 2 and 3 free, 0-2 20 + 0-3 20 + 1-2
     * 120 + 1-3 20 = 180; {1, 2} leaves 3 free, 1-3 20 + 2-3 50 = 70. Documented answer {1, 2}. (An affinity to every
     * GPU free before the allocation, shared GPU 0 charged for its link to 1 that the set itself takes, gives {0, 1}.)
     */
    @ParameterizedTest
    @EnumSource(Objective.class)
    void sharedSetMixingSharedAndFreeTieBreaksByWhatStaysFree(Objective o) {
        List<GpuDevice> devs = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            devs.add(SearchOracle.device(i, 0));
        }
        GpuTopology t = GpuTopology.builder(devs).links(0, 1, 1).links(1, 2, 1).pcie(2, 3, PcieLevel.SINGLE).build();
        List<DeviceState> all = new ArrayList<>();
        for (GpuDevice d : devs) {
            all.add(d.index() == 0 ? SearchOracle.shared(d) : DeviceState.idle(d, GpuHealth.HEALTHY));
        }
        SchedulingView v = SearchOracle.view(all, all, t);
        GpuRequest req = GpuRequest.builder().count(2).shared(MemorySize.ofGibibytes(1)).build();
        assertEquals(List.of(1, 2), SearchOracle.best(o, req, v).set(), "the brute force's reading");
        assertEquals(List.of(1, 2), SearchOracle.sorted(new TopologyAwareStrategy(o).select(req, v)));
    }
}
