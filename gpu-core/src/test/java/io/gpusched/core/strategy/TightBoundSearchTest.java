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
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The branch and bound's tighter bound (each device's best r - 1 partners) must never prune the optimum. It is forced on
 * from the first node and the answer's value is checked against every choice of counts per class, enumerated here
 * without any bound; the same search with the plain bound must agree. Nodes mix unstructured links, twins (partitions
 * of one GPU), held devices and required devices, so the capacities, lower bounds and both objectives are exercised.
 * The block search is turned off so every try runs the branch and bound.
 */
class TightBoundSearchTest {

    static GpuDevice device(int i, int n) {
        return GpuDevice.builder().index(i).uuid("GPU-t-" + i).vendor(GpuVendor.NVIDIA).name("X")
                .memory(MemorySize.ofGibibytes(16)).pciBusId("b" + i).numaNode(i * 2 / n).minor(i).build();
    }

    /** Devices in groups of {@code per} (partitions of one GPU: each other's closest peers), random links between groups. */
    static GpuTopology topology(Random rnd, List<GpuDevice> devices, int per) {
        GpuTopology.Builder b = GpuTopology.builder(devices);
        PcieLevel[] levels = PcieLevel.values();
        int n = devices.size();
        int groups = (n + per - 1) / per;
        int[][] links = new int[groups][groups];
        PcieLevel[][] pcie = new PcieLevel[groups][groups];
        for (int x = 0; x < groups; x++) {
            for (int y = x + 1; y < groups; y++) {
                links[x][y] = rnd.nextInt(3) == 0 ? 1 + rnd.nextInt(12) : 0;
                pcie[x][y] = levels[2 + rnd.nextInt(levels.length - 2)];
            }
        }
        for (int i = 0; i < n; i++) {
            for (int j = i + 1; j < n; j++) {
                int x = i / per;
                int y = j / per;
                if (x == y) {
                    b.links(i, j, 20);
                    b.pcie(i, j, levels[1]);
                } else {
                    if (links[x][y] > 0) {
                        b.links(i, j, links[x][y]);
                    }
                    b.pcie(i, j, pcie[x][y]);
                }
            }
        }
        return b.build();
    }

    static DeviceState held(GpuDevice d) {
        return new DeviceState(d, GpuHealth.HEALTHY, Optional.of("other"), 0, MemorySize.ZERO, Optional.empty(),
                DeviceState.Pool.IN_POOL, Optional.empty(), Optional.empty());
    }

    /** @return the best value over every count vector lo <= m <= cap with sum k, no pruning */
    static long[] exhaustive(PlacementSearch s, int k) {
        int[][] limits = s.classLimits();
        int[] m = new int[limits[0].length];
        long[][] best = {null};
        enumerate(s, limits[0], limits[1], 0, k, m, best);
        return best[0];
    }

    static void enumerate(PlacementSearch s, int[] lo, int[] cap, int j, int left, int[] m, long[][] best) {
        if (j == m.length) {
            if (left == 0) {
                long[] v = s.value(m);
                if (best[0] == null || java.util.Arrays.compare(v, best[0]) > 0) {
                    best[0] = v;
                }
            }
            return;
        }
        for (int x = lo[j]; x <= Math.min(cap[j], left); x++) {
            m[j] = x;
            enumerate(s, lo, cap, j + 1, left - x, m, best);
        }
        m[j] = 0;
    }

    @ParameterizedTest
    @EnumSource(Objective.class)
    void theTighterBoundNeverPrunesTheOptimum(Objective objective) {
        Random rnd = new Random(4242 + objective.ordinal());
        int tightRuns = 0;
        int prunedMore = 0;
        for (int tr = 0; tr < 400; tr++) {
            int per = 1 + rnd.nextInt(3);
            int n = 10 + rnd.nextInt(9);
            List<GpuDevice> devices = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                devices.add(device(i, n));
            }
            GpuTopology t = topology(rnd, devices, per);
            List<DeviceState> all = new ArrayList<>();
            List<DeviceState> pool = new ArrayList<>();
            for (GpuDevice d : devices) {
                if (rnd.nextInt(5) == 0) {
                    all.add(held(d));
                } else {
                    DeviceState s = DeviceState.idle(d, GpuHealth.HEALTHY);
                    all.add(s);
                    pool.add(s);
                }
            }
            if (pool.size() < 3) {
                continue;
            }
            int k = 2 + rnd.nextInt(Math.min(7, pool.size() - 1));
            List<Integer> required = new ArrayList<>();
            if (rnd.nextInt(3) == 0) {
                required.add(pool.get(rnd.nextInt(pool.size())).index());
            }
            TopologyScores ts = new TopologyScores(t);
            PlacementSearch tight = new PlacementSearch(ts, pool, required, all, k, objective, 0, false);
            List<Integer> got = tight.run();
            PlacementSearch plain = new PlacementSearch(ts, pool, required, all, k, objective, Integer.MAX_VALUE,
                    false);
            List<Integer> plainGot = plain.run();
            assertThat(tight.usedTightBound()).isTrue();
            assertThat(plain.usedTightBound()).isFalse();
            assertThat(tight.quality().provenOptimal()).isTrue();
            assertThat(got).hasSize(k).doesNotHaveDuplicates().containsAll(required);
            String what = String.format("try %d: n %d, per %d, k %d, required %s, pool %s", tr, n, per, k, required,
                    pool.stream().map(DeviceState::index).toList());
            assertThat(tight.bestValue()).as(what).isEqualTo(exhaustive(tight, k));
            assertThat(got).as(what).isEqualTo(plainGot);
            tightRuns++;
            if (tight.nodesVisited() < plain.nodesVisited()) {
                prunedMore++;
            }
        }
        assertThat(tightRuns).as("tries that ran").isGreaterThan(350);
        assertThat(prunedMore).as("tries where the tighter bound pruned more").isGreaterThan(tightRuns / 4);
    }
}
