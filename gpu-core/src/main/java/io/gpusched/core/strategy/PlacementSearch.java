package io.gpusched.core.strategy;

import static io.gpusched.core.strategy.TopologyAwareStrategy.BLOCK_COMPOSITIONS;
import static io.gpusched.core.strategy.TopologyAwareStrategy.EXACT;
import static io.gpusched.core.strategy.TopologyAwareStrategy.TIGHT_BOUND_AFTER;

import io.gpusched.core.DeviceState;
import io.gpusched.core.PlacementQuality;
import io.gpusched.core.strategy.TopologyAwareStrategy.Objective;
import java.util.Arrays;
import java.util.List;

/**
 * One request's search ({@link TopologyAwareStrategy} builds one per call): the order of the phases and the
 * certificate. The tables and their set-up are {@link SearchTables}; the answers found without branching (the exact
 * block and pair searches, the greedy start, restarts and local search) {@link IncumbentSearch}; the root bound for a
 * search that ends early {@link RootBoundSearch}; the branch and bound and its frontier {@link BranchAndBound}. They
 * are layers of one object because every phase reads and charges the same per-class tables and work counter.
 */
final class PlacementSearch extends BranchAndBound {
    /**
     * For tests that measure the branch and bound itself: pool = candidates, no budget, the greedy incumbent
     * without the local search (so the search nodes counted are those of the branch and bound from a plain start).
     */
    PlacementSearch(TopologyScores ts, List<DeviceState> pool, List<Integer> required, List<DeviceState> devices, int k,
            Objective objective) {
        this(ts, pool, identity(pool.size()), required, devices, k, objective, EXACT, TIGHT_BOUND_AFTER, true,
                new SearchScratch());
        this.localSearch = false;
    }

    /**
     * For tests: pool = candidates, no budget; when the tighter bound is built, whether the exact shortcuts
     * (blocks, at most two devices to choose) may answer instead of the branch and bound.
     */
    PlacementSearch(TopologyScores ts, List<DeviceState> pool, List<Integer> required, List<DeviceState> devices, int k,
            Objective objective, int tightAfter, boolean blockSearch) {
        this(ts, pool, identity(pool.size()), required, devices, k, objective, EXACT, tightAfter, blockSearch,
                new SearchScratch());
    }

    /** For tests: as the strategy's search, with tables of its own. */
    PlacementSearch(TopologyScores ts, List<DeviceState> pool, int[] candPos, List<Integer> required,
            List<DeviceState> devices, int k, Objective objective, long budget, int tightAfter,
            boolean blockSearch) {
        this(ts, pool, candPos, required, devices, k, objective, budget, tightAfter, blockSearch,
                new SearchScratch());
    }

    PlacementSearch(TopologyScores ts, List<DeviceState> pool, int[] candPos, List<Integer> required,
            List<DeviceState> devices, int k, Objective objective, long budget, int tightAfter,
            boolean blockSearch, SearchScratch scratch) {
        super(ts, pool, candPos, required, devices, k, objective, budget, tightAfter, blockSearch, scratch);
    }

    /** @return proven optimal, or the gap to the upper bound the unexplored branches leave */
    PlacementQuality quality() {
        if (!exhausted) {
            return PlacementQuality.optimal();
        }
        long ub2 = haveFrontier ? fA : Long.MAX_VALUE;
        if (haveRootBound) {
            // two upper bounds on the optimum (the unexplored branches', the root's tighter one): the smaller holds
            ub2 = Math.min(ub2, rootBoundA2);
        }
        ub2 = Math.max(ub2 == Long.MAX_VALUE ? 2 * bA : ub2, 2 * bA);
        long ubA = Math.floorDiv(ub2, 2);
        long gap = ubA - bA;
        long denom = ubA + offsetA;
        // rounded up by far more than the division's error (about 1e-16 relative), so the claim is never below the gap
        double pct = gap <= 0 || denom <= 0 ? 0 : Math.min(100, 100.0 * gap / denom * (1 + 1e-12));
        return PlacementQuality.within(pct);
    }

    List<Integer> run() {
        int need = k;
        for (int j = 0; j < c; j++) {
            need -= lo[j];
        }
        if (need < 0) {
            return List.of();
        }
        if (blockSearchAllowed && blockOfClass != null && compositions(nb, k) <= BLOCK_COMPOSITIONS
                && blockWork() <= budget) {
            blockSearch();
            exactByBlocks = true;
            return answer();
        }
        // at most two devices to choose: the exact pair scan, whatever the budget (c^2/2 units, less than the
        // tables no answer skips; a greedy answer can be half the optimum on a large node)
        if (blockSearchAllowed && need <= 2) {
            pairSearch(need);
            return answer();
        }
        greedy();
        if (localSearch) {
            localSearch();
        }
        // the branch and bound's own set-up (order, suffix maxima) costs about 5 c^2: only when the budget has it
        if (work + 5L * c * c > budget) {
            exhausted = true;
            haveFrontier = false;
            restarts();
            rootFrontier();
            return answer();
        }
        prepareBranchAndBound();
        order();
        // suffix maxima of the pair weights: best partner of class j among classes t..c-1 (lexicographic)
        for (int t = c; t >= 0; t--) {
            for (int j = 0; j < c; j++) {
                long ma = Long.MIN_VALUE;
                long mb = Long.MIN_VALUE;
                if (t < c) {
                    ma = smA[(t + 1) * c + j];
                    mb = smB[(t + 1) * c + j];
                    if (t != j || cap[j] >= 2) {
                        // pair weights are symmetric: row t, read in order
                        long a = pA[t * c + j];
                        long b = pB[t * c + j];
                        if (ma == Long.MIN_VALUE || gt(a, b, 0, ma, mb, 0)) {
                            ma = a;
                            mb = b;
                        }
                    }
                }
                smA[t * c + j] = ma;
                smB[t * c + j] = mb;
            }
        }
        work += 2L * c * c;
        Arrays.fill(counts, 0);
        Arrays.fill(linA, 0);
        Arrays.fill(linB, 0);
        branch(0, 0, 0, 0, 0);
        if (exhausted) {
            restarts();
            rootBound();
        }
        return answer();
    }

    /**
     * For tests, after {@link #run()}: the root bound from the pool's rows (twice an upper bound on A) with
     * {@code units} of Lagrangian steps (0: the plain, even split only).
     */
    long rowsBoundA2(long units) {
        return lagrangianBound2(units);
    }

    /** @return the work units {@link #run()} spent */
    long workSpent() {
        return work;
    }

    /** @return the value (A, B, C) of the answer {@link #run()} chose, in the search's own weights */
    long[] bestValue() {
        return new long[]{bA, bB, bC};
    }

    /** @return search nodes {@link #run()} visited (0 when the block search answered) */
    int nodesVisited() {
        return nodes;
    }

    /** @return whether the tighter bound was built during {@link #run()} */
    boolean usedTightBound() {
        return topA != null;
    }

    /** @return whether the answer came from the exact block search */
    boolean answeredByBlocks() {
        return exactByBlocks;
    }

    /** @return per class (in the search's order after {@link #run()}): fewest and most devices it may give */
    int[][] classLimits() {
        return new int[][]{lo.clone(), cap.clone()};
    }
}
