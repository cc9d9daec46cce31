package io.gpusched.core.strategy;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.DeviceState;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.strategy.TopologyAwareStrategy.Objective;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The root bound's Lagrangian steps (issue 23, certificates): on random small nodes (links on a third of the pairs,
 * twins, held devices), the bound after the steps must still be at least twice the best first key A over every k-subset
 * of the pool, enumerated here from the documented objective with the pair scores of {@link PairScore} (SET: the set's
 * score; REMAINING: the set's score plus what stays among the free devices minus the free devices' own score), never
 * with the search; it must never be above the plain bound (even split), and over the corpus it must be below it (the
 * steps tighten). The steps are charged to the work counter: within the units given, one step's overshoot at most.
 */
class LagrangianBoundTest {

    @ParameterizedTest
    @EnumSource(Objective.class)
    void stepsTightenTheRootBoundAndItStillHolds(Objective objective) {
        Random rnd = new Random(2311 + objective.ordinal());
        long plainSum = 0;
        long stepSum = 0;
        int tightened = 0;
        int runs = 0;
        for (int tr = 0; tr < 150; tr++) {
            int n = 9 + rnd.nextInt(6);
            List<GpuDevice> devices = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                devices.add(TightBoundSearchTest.device(i, n));
            }
            GpuTopology t = TightBoundSearchTest.topology(rnd, devices, 1 + rnd.nextInt(2));
            List<DeviceState> all = new ArrayList<>();
            List<DeviceState> pool = new ArrayList<>();
            for (GpuDevice d : devices) {
                if (rnd.nextInt(5) == 0) {
                    all.add(TightBoundSearchTest.held(d));
                } else {
                    DeviceState s = DeviceState.idle(d, GpuHealth.HEALTHY);
                    all.add(s);
                    pool.add(s);
                }
            }
            if (pool.size() < 5) {
                continue;
            }
            int k = 3 + rnd.nextInt(pool.size() - 4);
            PlacementSearch s = new PlacementSearch(new TopologyScores(t), pool, List.of(), all, k, objective);
            s.run();
            long best = bestA(t, objective, pool, k);
            long plain = s.rowsBoundA2(0);
            long c = s.classLimits()[0].length;
            // the steps are charged: 5 c^2 units hold the plain step (3 c^2) but not a step more (4 c^2 each)
            assertThat(s.rowsBoundA2(5 * c * c)).as("no step beyond what the units pay for").isEqualTo(plain);
            long before = s.workSpent();
            long stepped = s.rowsBoundA2(1_000_000);
            assertThat(s.workSpent() - before).as("units spent by the steps").isBetween(3 * c * c, 1_000_000 + 7 * c * c
                    + 3 * c);
            String what = objective + " try " + tr + " n " + n + " k " + k;
            assertThat(stepped).as(what + ": the bound holds").isGreaterThanOrEqualTo(2 * best);
            assertThat(plain).as(what + ": the plain bound holds").isGreaterThanOrEqualTo(2 * best);
            assertThat(stepped).as(what + ": never looser than the even split").isLessThanOrEqualTo(plain);
            plainSum += plain - 2 * best;
            stepSum += stepped - 2 * best;
            tightened += stepped < plain ? 1 : 0;
            runs++;
        }
        assertThat(runs).isGreaterThan(100);
        assertThat(tightened).as("tries where the steps tightened the bound").isGreaterThan(runs / 4);
        assertThat(stepSum).as("excess over the optimum, summed: steps vs the even split").isLessThan(plainSum);
    }

    /** @return the largest first key A over every k-subset of the pool (all of it is free here) */
    static long bestA(GpuTopology t, Objective o, List<DeviceState> pool, int k) {
        int n = pool.size();
        List<Integer> free = pool.stream().map(DeviceState::index).toList();
        long freeScore = PairScore.ofSet(t, free);
        long best = Long.MIN_VALUE;
        for (int mask = 0; mask < 1 << n; mask++) {
            if (Integer.bitCount(mask) != k) {
                continue;
            }
            List<Integer> set = new ArrayList<>();
            List<Integer> stay = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                ((mask >> i & 1) != 0 ? set : stay).add(free.get(i));
            }
            long a = PairScore.ofSet(t, set);
            if (o == Objective.REMAINING) {
                a += PairScore.ofSet(t, stay) - freeScore;
            }
            best = Math.max(best, a);
        }
        return best;
    }
}
