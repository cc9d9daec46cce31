package io.gpusched.core.strategy;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.DeviceState;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.PcieLevel;
import io.gpusched.core.strategy.TopologyAwareStrategy.Objective;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * Issue 23: a search's budget counts its set-up. On an irregular node of 384 devices (no twins: one class per device),
 * every search charges the two c x c tables it builds, and spends at most the larger of its budget and what no answer
 * can skip (the tables, the affinity rows, the pair scan, the greedy starts), plus the documented allowances (the frontier's quarter,
 * the root bound's and the restarts' eighths), whatever the budget and k: the set-up counts against the budget, not on top of it.
 */
class SearchBudgetTest {

    @Test
    void setUpIsChargedAndTheBudgetHolds() {
        int n = 384;
        Random r = new Random(2323);
        List<GpuDevice> devs = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            devs.add(GpuDevice.builder().index(i).uuid("GPU-b-" + i).vendor(GpuVendor.NVIDIA).name("X")
                    .memory(MemorySize.ofGibibytes(80)).pciBusId("b" + i).numaNode(i * 2 / n).minor(i).build());
        }
        GpuTopology.Builder b = GpuTopology.builder(devs);
        for (int i = 0; i < n; i++) {
            for (int j = i + 1; j < n; j++) {
                if (r.nextInt(3) == 0) {
                    b.links(i, j, 1 + r.nextInt(4));
                }
                b.pcie(i, j, PcieLevel.values()[1 + r.nextInt(PcieLevel.values().length - 1)]);
            }
        }
        TopologyScores ts = new TopologyScores(b.build());
        List<DeviceState> all = new ArrayList<>();
        List<DeviceState> pool = new ArrayList<>();
        for (GpuDevice d : devs) {
            boolean held = r.nextInt(4) == 0;
            DeviceState s = held ? new DeviceState(d, GpuHealth.HEALTHY, Optional.of("held"), 0, MemorySize.ZERO,
                    Optional.empty(), DeviceState.Pool.IN_POOL, Optional.empty(), Optional.empty())
                    : DeviceState.idle(d, GpuHealth.HEALTHY);
            all.add(s);
            if (!held) {
                pool.add(s);
            }
        }
        int free = pool.size();
        int[] pos = new int[free];
        for (int i = 0; i < free; i++) {
            pos[i] = i;
        }
        int runs = 0;
        for (Objective o : Objective.values()) {
            for (long budget : new long[]{1_000, 100_000, 300_000, 1_000_000}) {
                for (int k : new int[]{2, 3, free / 16, free / 4, free / 2}) {
                    PlacementSearch s = new PlacementSearch(ts, pool, pos, List.of(), all, k, o, budget,
                            TopologyAwareStrategy.TIGHT_BOUND_AFTER, true);
                    List<Integer> got = s.run();
                    assertThat(got).hasSize(k).doesNotHaveDuplicates();
                    long c = s.classLimits()[0].length;
                    assertThat(c).isEqualTo(free);
                    String what = o + " k " + k + " budget " + budget + ": spent " + s.workSpent();
                    assertThat(s.workSpent()).as(what + ", the tables are charged").isGreaterThanOrEqualTo(2 * c * c);
                    // what no answer skips: the tables, the affinity rows (at most n x the non-free devices), the
                    // greedy start and the scan of every pair (the exact answer for k <= 2, the greedy's best
                    // start for more); it counts against the budget, it does not come on top of it
                    long unavoidable = 2 * c * c + c * c / 2 + n + (long) n * (n - free) + 4L * k * c;
                    // the frontier's quarter, the root bound's and the restarts' eighths, one step's overshoot
                    long allowance = budget / 4 + 10_000 + budget / 8 + budget / 8 + 8 * c;
                    assertThat(s.workSpent()).as(what).isLessThanOrEqualTo(Math.max(budget, unavoidable) + allowance);
                    runs++;
                }
            }
        }
        assertThat(runs).isEqualTo(40);
    }
}
