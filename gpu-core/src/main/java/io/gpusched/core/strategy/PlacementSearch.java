package io.gpusched.core.strategy;

import static io.gpusched.core.strategy.TopologyAwareStrategy.BLOCK_COMPOSITIONS;
import static io.gpusched.core.strategy.TopologyAwareStrategy.EXACT;
import static io.gpusched.core.strategy.TopologyAwareStrategy.LAGRANGE_EXACT_UNITS;
import static io.gpusched.core.strategy.TopologyAwareStrategy.TIGHT_BOUND_AFTER;
import static io.gpusched.core.strategy.TopologyAwareStrategy.TIGHT_BOUND_ENTRIES;

import io.gpusched.core.DeviceState;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.PlacementQuality;
import io.gpusched.core.strategy.TopologyAwareStrategy.Objective;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * One request: the pool grouped into classes of interchangeable devices (twins that are both free or both not), and
 * a search over how many each class gives. A choice of counts {@code m} is worth, per key (A, B, C, compared in
 * that order), {@code sum_j m_j node_j + sum_{i<j} m_i m_j pair_ij + sum_j C(m_j, 2) pair_jj}, and C is minus the
 * sum of candidate positions of the first {@code m_j} members of each class. SET: A = set score, B = minus the
 * affinity to what stays free ({@code node = -affinity to every free device}, {@code pair_B = s x (free ends)}).
 * REMAINING: A = set score + score left among the free devices minus the free devices' total
 * ({@code node = -affinity}, {@code pair_A = 2s}), B = set score.
 */
final class PlacementSearch extends SearchTables {
    private int nodes;

    private long frontierWork;

    private boolean loose;

    private boolean haveFrontier;

    /** Whether {@link #rootBound()} ran, and its bound (twice an upper bound on A). */
    private boolean haveRootBound;

    private long rootBoundA2;

    private long fA;

    private long fB;

    private long fC;

    private int[] counts;

    private long[] linA;

    private long[] linB;

    private long[] smA;

    private long[] smB;

    private long[] gA;

    private long[] gB;

    private long[] gC;

    private boolean[] used;

    private int[] sel;

    private long retA;

    private long retB;

    private long retC;

    /** Per (t, j, u): the largest sum (A, B) of u partner pair weights of one class-j device among classes t.. */
    private long[] topA;

    private long[] topB;

    private boolean tightTried;

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
        double pct = gap <= 0 || denom <= 0 ? 0 : Math.min(100, 100.0 * gap / denom);
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
        if (blockSearchAllowed && need <= 2 && (long) c * c / 2 + work <= budget) {
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

    /** Budget ran out before the branch and bound: the only bound is the root's (the whole search unexplored). */
    private void rootFrontier() {
        rootBound();
    }

    /**
     * Twice an upper bound on the first key (A) of any answer, into {@link #rootBoundA2}: every device brings at
     * most twice its node weight plus its k - 1 best partner weights (within the class capacities; the pairs among
     * the k devices sum to half of that over the devices), and an answer is at most the k best devices by that.
     * The partners come from the pool's own rows where the 3 c^2 units a selection per class costs are at most an
     * eighth of the budget (always with {@link #EXACT}), else from the topology's table of best partners among all
     * its devices (looser: it counts held devices too), else each partner is taken at the largest pair weight.
     */
    private void rootBound() {
        long[] g = new long[c];
        int[] gw = new int[c];
        boolean rows = budget == EXACT || 3L * c * c <= budget / 8;
        long[] prefix = k > 1 && !rows ? ts.partnerPrefix() : null;
        if (k <= 1 || !rows && prefix == null) {
            // no pair, or neither the exact rows nor the table: each partner at most the largest pair weight
            long maxPair = pairFactorA * ts.maxScore;
            for (int j = 0; j < c; j++) {
                g[j] = 2 * nA[j] + (k - 1) * maxPair;
                gw[j] = cap[j];
            }
            work += c;
        } else if (prefix != null) {
            // the topology's table: a member's k - 1 best partners among all devices, a superset of the pool
            int n = ts.indices.length;
            int m = Math.min(k - 1, n - 1);
            for (int j = 0; j < c; j++) {
                g[j] = 2 * nA[j] + pairFactorA * prefix[staticOf[j] * n + m];
                gw[j] = cap[j];
            }
            work += c;
        } else {
            // the pool's own rows, with the pair weights split between their ends by a Lagrangian search
            rootBoundA2 = lagrangianBound2(budget == EXACT ? LAGRANGE_EXACT_UNITS : budget / 8);
            haveRootBound = true;
            return;
        }
        rootBoundA2 = topSum(g, gw, c, k);
        haveRootBound = true;
    }

    /**
     * Twice an upper bound on A from the pool's own rows. For any split of each pair weight between its two ends
     * ({@code s_jl + s_lj = 2 pair_jl}), twice an answer's A is the sum over its devices of {@code 2 node_j + sum of
     * s_jl over its other devices}: each device brings at most {@code 2 node_j} plus its k - 1 best shares, and an
     * answer at most the k best devices by that. The even split gives the plain bound (each device's k - 1 best
     * partner weights); subgradient steps then move each pair's share away from an end that counts it while the
     * other end does not (Polyak steps towards the incumbent), and the smallest bound is kept. Every split gives a
     * valid bound, whatever the steps do, so the result holds; the steps only decide how tight. About 4 c^2 units a
     * step, within {@code units} (the first, plain, step is always taken: 3 c^2).
     */
    private long lagrangianBound2(long units) {
        long start = work;
        long[] share = new long[c * c];
        System.arraycopy(pA, 0, share, 0, c * c);
        long[] h = new long[c];
        long[] thr = new long[c];
        long[] tie = new long[c];
        long[] vals = new long[c];
        int[] wts = new int[c];
        int[] x = new int[c];
        int[] y = new int[c * c];
        long[] out = new long[2];
        long best = Long.MAX_VALUE;
        long target = 2 * bA;
        double theta = 1.0;
        int since = 0;
        while (true) {
            for (int j = 0; j < c; j++) {
                int len = 0;
                for (int l = 0; l < c; l++) {
                    int w = l == j ? cap[j] - 1 : cap[l];
                    if (w > 0) {
                        vals[len] = share[j * c + l];
                        wts[len++] = w;
                    }
                }
                h[j] = 2 * nA[j] + topSum(vals, wts, len, k - 1, out);
                thr[j] = out[0];
                tie[j] = out[1];
            }
            for (int j = 0; j < c; j++) {
                vals[j] = h[j];
                wts[j] = cap[j];
            }
            long b2 = topSum(vals, wts, c, k, out);
            work += 3L * c * c + 3L * c;
            if (b2 < best) {
                best = b2;
                since = 0;
            } else if (++since >= 3) {
                theta /= 2;
                since = 0;
            }
            if (best <= target || work - start + 4L * c * c > units || theta < 1e-3) {
                return best;
            }
            // the maximizer: x_j devices of class j among the k, and each class's chosen partners y_jl
            long hTie = out[1];
            for (int j = 0; j < c; j++) {
                if (h[j] > out[0]) {
                    x[j] = cap[j];
                } else if (h[j] == out[0] && hTie > 0) {
                    x[j] = (int) Math.min(hTie, cap[j]);
                    hTie -= x[j];
                } else {
                    x[j] = 0;
                }
                long t = tie[j];
                for (int l = 0; l < c; l++) {
                    int w = l == j ? cap[j] - 1 : cap[l];
                    long v = share[j * c + l];
                    int yy = 0;
                    if (w > 0 && v > thr[j]) {
                        yy = w;
                    } else if (w > 0 && v == thr[j] && t > 0) {
                        yy = (int) Math.min(t, w);
                        t -= yy;
                    }
                    y[j * c + l] = yy;
                }
            }
            double norm = 0;
            for (int j = 0; j < c; j++) {
                for (int l = j + 1; l < c; l++) {
                    double gr = (double) x[j] * y[j * c + l] - (double) x[l] * y[l * c + j];
                    norm += gr * gr;
                }
            }
            work += 2L * c * c;
            if (norm == 0) {
                return best;
            }
            double step = theta * (b2 - target) / norm;
            for (int j = 0; j < c; j++) {
                for (int l = j + 1; l < c; l++) {
                    long gr = (long) x[j] * y[j * c + l] - (long) x[l] * y[l * c + j];
                    if (gr != 0) {
                        long d = Math.round(step * gr);
                        share[j * c + l] -= d;
                        share[l * c + j] += d;
                    }
                }
            }
        }
    }

    /**
     * The sum of the {@code units} largest values, value i available {@code w[i]} times (all of them when fewer):
     * a weighted selection (quickselect, three-way partition around the middle element), expected linear time.
     * Reorders the first {@code len} entries of both arrays.
     */
    static long topSum(long[] v, int[] w, int len, long units) {
        return topSum(v, w, len, units, null);
    }

    /**
     * {@link #topSum(long[], int[], int, long)}, and where {@code out} is given: {@code out[0]} the smallest value
     * taken and {@code out[1]} the units taken at that value (every larger value is taken whole; {@code
     * Long.MIN_VALUE} and 0 when every unit was taken).
     */
    static long topSum(long[] v, int[] w, int len, long units, long[] out) {
        long lastPivot = Long.MIN_VALUE;
        long lastTake = 0;
        long sum = 0;
        int lo = 0;
        int hi = len;
        while (units > 0 && lo < hi) {
            long pivot = v[lo + (hi - lo) / 2];
            // [lo, gt) > pivot, [gt, i) == pivot, [lt, hi) < pivot
            int gtEnd = lo;
            int i = lo;
            int ltStart = hi;
            while (i < ltStart) {
                if (v[i] > pivot) {
                    swap(v, w, i++, gtEnd++);
                } else if (v[i] < pivot) {
                    swap(v, w, i, --ltStart);
                } else {
                    i++;
                }
            }
            long wg = 0;
            long sg = 0;
            for (int x = lo; x < gtEnd; x++) {
                wg += w[x];
                sg += v[x] * w[x];
            }
            if (wg >= units) {
                hi = gtEnd;
                continue;
            }
            sum += sg;
            units -= wg;
            long weq = 0;
            for (int x = gtEnd; x < ltStart; x++) {
                weq += w[x];
            }
            long take = Math.min(units, weq);
            sum += pivot * take;
            units -= take;
            if (take > 0) {
                lastPivot = pivot;
                lastTake = take;
            }
            lo = ltStart;
        }
        if (out != null) {
            out[0] = units > 0 ? Long.MIN_VALUE : lastPivot;
            out[1] = units > 0 ? 0 : lastTake;
        }
        return sum;
    }

    private static void swap(long[] v, int[] w, int a, int b) {
        long tv = v[a];
        v[a] = v[b];
        v[b] = tv;
        int tw = w[a];
        w[a] = w[b];
        w[b] = tw;
    }

    private long blockWork() {
        // the splits' recursion: at most about nb nodes per composition, and a cross update per device placed
        long w = compositions(nb, k) * (Math.max(1, nb) + (long) k * nb) + (long) nb * nb;
        for (int j = 0; j < c; j++) {
            w += (long) (cap[j] + 1) * (k + 1);
        }
        return w;
    }

    /** Scratch of the branch and bound, allocated only when it runs. */
    private void prepareBranchAndBound() {
        counts = new int[c];
        linA = new long[c];
        linB = new long[c];
        smA = scratch.table(SearchScratch.SUFFIX_A, c * (c + 1));
        smB = scratch.table(SearchScratch.SUFFIX_B, c * (c + 1));
        gA = new long[c];
        gB = new long[c];
        gC = new long[c];
        used = new boolean[c];
        sel = new int[c];
    }

    /** @return the number of ways to split k into b ordered parts, capped */
    private static long compositions(int b, int k) {
        long r = 1;
        for (int i = 1; i < b; i++) {
            r = r * (k + i) / i;
            if (r > BLOCK_COMPOSITIONS) {
                return r;
            }
        }
        return r;
    }

    /** Exact search where the classes fall into few blocks (see the class comment of the strategy). */
    private void blockSearch() {
        int[][] cls = new int[nb][];
        int[] size = new int[nb];
        for (int j = 0; j < c; j++) {
            size[blockOfClass[j]]++;
        }
        for (int b = 0; b < nb; b++) {
            cls[b] = new int[size[b]];
            size[b] = 0;
        }
        for (int j = 0; j < c; j++) {
            int b = blockOfClass[j];
            cls[b][size[b]++] = j;
        }
        long[] wA = new long[nb];
        long[] wB = new long[nb];
        long[] xA = new long[nb * nb];
        long[] xB = new long[nb * nb];
        for (int b = 0; b < nb; b++) {
            if (cls[b].length >= 2) {
                wA[b] = pA[cls[b][0] * c + cls[b][1]];
                wB[b] = pB[cls[b][0] * c + cls[b][1]];
            }
            for (int b2 = 0; b2 < nb; b2++) {
                if (b != b2) {
                    xA[b * nb + b2] = pA[cls[b][0] * c + cls[b2][0]];
                    xB[b * nb + b2] = pB[cls[b][0] * c + cls[b2][0]];
                }
            }
        }
        long[][][] value = new long[nb][][];
        boolean[][] ok = new boolean[nb][];
        int[][][] choice = new int[nb][][];
        for (int b = 0; b < nb; b++) {
            long[][] cur = new long[3][k + 1];
            boolean[] curOk = new boolean[k + 1];
            curOk[0] = true;
            choice[b] = new int[cls[b].length][k + 1];
            for (int x = 0; x < cls[b].length; x++) {
                int j = cls[b][x];
                long[][] nxt = new long[3][k + 1];
                boolean[] nxtOk = new boolean[k + 1];
                for (int mTot = 0; mTot <= k; mTot++) {
                    for (int m = lo[j]; m <= Math.min(cap[j], mTot); m++) {
                        if (!curOk[mTot - m]) {
                            continue;
                        }
                        long tri = (long) m * (m - 1) / 2;
                        long va = cur[0][mTot - m] + nA[j] * m + pA[j * c + j] * tri - wA[b] * tri;
                        long vb = cur[1][mTot - m] + nB[j] * m + pB[j * c + j] * tri - wB[b] * tri;
                        long vc = cur[2][mTot - m] - posPrefix[j][m];
                        if (!nxtOk[mTot] || gt(va, vb, vc, nxt[0][mTot], nxt[1][mTot], nxt[2][mTot])) {
                            nxtOk[mTot] = true;
                            nxt[0][mTot] = va;
                            nxt[1][mTot] = vb;
                            nxt[2][mTot] = vc;
                            choice[b][x][mTot] = m;
                        }
                    }
                }
                cur = nxt;
                curOk = nxtOk;
            }
            for (int mTot = 0; mTot <= k; mTot++) {
                long tri = (long) mTot * (mTot - 1) / 2;
                cur[0][mTot] += wA[b] * tri;
                cur[1][mTot] += wB[b] * tri;
            }
            value[b] = cur;
            ok[b] = curOk;
        }
        int[] split = new int[nb];
        int[] bestSplit = new int[nb];
        haveBest = false;
        splits(0, k, 0, 0, 0, split, bestSplit, value, ok, xA, xB, new long[nb], new long[nb]);
        bestCounts = new int[c];
        for (int b = 0; b < nb; b++) {
            int mTot = bestSplit[b];
            for (int x = cls[b].length - 1; x >= 0; x--) {
                int m = choice[b][x][mTot];
                bestCounts[cls[b][x]] = m;
                mTot -= m;
            }
        }
    }

    private void splits(int b, int left, long va, long vb, long vc, int[] split, int[] bestSplit,
                        long[][][] value, boolean[][] ok, long[] xA, long[] xB, long[] crossA, long[] crossB) {
        if (b == nb) {
            if (left == 0 && (!haveBest || gt(va, vb, vc, bA, bB, bC))) {
                haveBest = true;
                bA = va;
                bB = vb;
                bC = vc;
                System.arraycopy(split, 0, bestSplit, 0, nb);
            }
            return;
        }
        for (int m = 0; m <= left; m++) {
            if (!ok[b][m]) {
                continue;
            }
            split[b] = m;
            long addA = value[b][0][m] + crossA[b] * m;
            long addB = value[b][1][m] + crossB[b] * m;
            if (m > 0) {
                for (int b2 = b + 1; b2 < nb; b2++) {
                    crossA[b2] += xA[b * nb + b2] * m;
                    crossB[b2] += xB[b * nb + b2] * m;
                }
                work += nb - b;
            }
            work++;
            splits(b + 1, left - m, va + addA, vb + addB, vc + value[b][2][m], split, bestSplit, value, ok, xA, xB,
                    crossA, crossB);
            if (m > 0) {
                for (int b2 = b + 1; b2 < nb; b2++) {
                    crossA[b2] -= xA[b * nb + b2] * m;
                    crossB[b2] -= xB[b * nb + b2] * m;
                }
            }
        }
    }

    /**
     * Exact where at most two devices are chosen beyond the required ones: every class, and every pair of classes
     * (about c^2 / 2 units).
     */
    private void pairSearch(int need) {
        int[] m = lo.clone();
        long[] sA = new long[c];
        long[] sB = new long[c];
        for (int j = 0; j < c; j++) {
            if (m[j] > 0) {
                addPartner(sA, sB, j, m[j]);
                work += c;
            }
        }
        // gain of one more member of class j
        long[] gA1 = new long[c];
        long[] gB1 = new long[c];
        long[] gC1 = new long[c];
        for (int j = 0; j < c; j++) {
            if (m[j] < cap[j]) {
                gA1[j] = nA[j] + sA[j];
                gB1[j] = nB[j] + sB[j];
                gC1[j] = -(posPrefix[j][m[j] + 1] - posPrefix[j][m[j]]);
            }
        }
        int bestJ = -1;
        int bestL = -1;
        long ba = 0;
        long bb = 0;
        long bc = 0;
        for (int j = 0; j < c && need > 0; j++) {
            if (m[j] >= cap[j]) {
                continue;
            }
            if (need == 1) {
                if (bestJ < 0 || gt(gA1[j], gB1[j], gC1[j], ba, bb, bc)) {
                    bestJ = j;
                    ba = gA1[j];
                    bb = gB1[j];
                    bc = gC1[j];
                }
                continue;
            }
            if (m[j] + 2 <= cap[j]) {
                long a = 2 * gA1[j] + pA[j * c + j];
                long b = 2 * gB1[j] + pB[j * c + j];
                long cc = -(posPrefix[j][m[j] + 2] - posPrefix[j][m[j]]);
                if (bestJ < 0 || gt(a, b, cc, ba, bb, bc)) {
                    bestJ = j;
                    bestL = j;
                    ba = a;
                    bb = b;
                    bc = cc;
                }
            }
            int row = j * c;
            for (int l = j + 1; l < c; l++) {
                if (m[l] >= cap[l]) {
                    continue;
                }
                long a = gA1[j] + gA1[l] + pA[row + l];
                long b = gB1[j] + gB1[l] + pB[row + l];
                long cc = gC1[j] + gC1[l];
                if (bestJ < 0 || gt(a, b, cc, ba, bb, bc)) {
                    bestJ = j;
                    bestL = l;
                    ba = a;
                    bb = b;
                    bc = cc;
                }
            }
            work += c - j;
        }
        if (bestJ >= 0) {
            m[bestJ]++;
        }
        if (bestL >= 0) {
            m[bestL]++;
        }
        setBest(m);
    }

    /**
     * Incumbent: the required devices, then one device at a time by the best marginal gain. When the search ends
     * early, {@link #restarts()} runs it again from every class as its first free choice (a plain greedy's first
     * pick decides much of a small set) where that fits an eighth of the budget, and keeps the best.
     */
    private void greedy() {
        setBest(greedyFrom(-1));
    }

    /** A search that ended early: the greedy again from every class (see {@link #greedy()}) may find better. */
    private void restarts() {
        int need = k;
        for (int j = 0; j < c; j++) {
            need -= lo[j];
        }
        if (need < 2 || 2L * c * c * need > budget / 8) {
            return;
        }
        for (int seed = 0; seed < c; seed++) {
            if (lo[seed] >= cap[seed]) {
                continue;
            }
            int[] m = greedyFrom(seed);
            long[] v = value(m);
            work += need;
            if (gt(v[0], v[1], v[2], bA, bB, bC)) {
                bA = v[0];
                bB = v[1];
                bC = v[2];
                bestCounts = m;
            }
        }
    }

    /** @return the greedy's counts, its first free choice forced to class {@code seed} (-1: none forced) */
    private int[] greedyFrom(int seed) {
        int[] m = lo.clone();
        long[] sA = new long[c];
        long[] sB = new long[c];
        int chosen = 0;
        for (int j = 0; j < c; j++) {
            chosen += m[j];
            if (m[j] > 0) {
                addPartner(sA, sB, j, m[j]);
            }
        }
        boolean first = true;
        while (chosen < k) {
            int pick = -1;
            long ga = 0;
            long gb = 0;
            long gc = 0;
            if (first && seed >= 0) {
                pick = seed;
            } else {
                for (int j = 0; j < c; j++) {
                    if (m[j] >= cap[j]) {
                        continue;
                    }
                    long a = nA[j] + sA[j];
                    long b = nB[j] + sB[j];
                    long cc = -(posPrefix[j][m[j] + 1] - posPrefix[j][m[j]]);
                    if (pick < 0 || gt(a, b, cc, ga, gb, gc)) {
                        pick = j;
                        ga = a;
                        gb = b;
                        gc = cc;
                    }
                }
            }
            first = false;
            m[pick]++;
            chosen++;
            addPartner(sA, sB, pick, 1);
            work += 2L * c;
        }
        return m;
    }

    /**
     * Improves the incumbent by moving one device from a class to another while that raises the value (first
     * improvement, every pair of classes per pass), within the budget.
     */
    private void localSearch() {
        int[] m = bestCounts.clone();
        long[] sA = new long[c];
        long[] sB = new long[c];
        for (int j = 0; j < c; j++) {
            if (m[j] > 0) {
                addPartner(sA, sB, j, m[j]);
            }
        }
        work += (long) c * c / 4;
        boolean improved = true;
        while (improved && work <= budget / 2) {
            improved = false;
            for (int a = 0; a < c && work <= budget / 2; a++) {
                if (m[a] <= lo[a]) {
                    continue;
                }
                // losing the last member of a
                long ra = nA[a] + sA[a] - pA[a * c + a];
                long rb = nB[a] + sB[a] - pB[a * c + a];
                long rc = -(posPrefix[a][m[a]] - posPrefix[a][m[a] - 1]);
                work += c;
                for (int b = 0; b < c; b++) {
                    if (b == a || m[b] >= cap[b]) {
                        continue;
                    }
                    long da = nA[b] + sA[b] - pA[b * c + a] - ra;
                    long db = nB[b] + sB[b] - pB[b * c + a] - rb;
                    long dcc = -(posPrefix[b][m[b] + 1] - posPrefix[b][m[b]]) - rc;
                    if (gt(da, db, dcc, 0, 0, 0)) {
                        m[a]--;
                        m[b]++;
                        addPartner(sA, sB, b, 1);
                        addPartner(sA, sB, a, -1);
                        work += c;
                        improved = true;
                        break;
                    }
                }
            }
        }
        setBest(m);
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
        return new long[] {bA, bB, bC};
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
        return new int[][] {lo.clone(), cap.clone()};
    }

    /** Search order: the incumbent's classes first (most devices first), then the rest by their best pair. */
    private void order() {
        Integer[] ord = new Integer[c];
        for (int j = 0; j < c; j++) {
            ord[j] = j;
        }
        long[] keyA = new long[c];
        long[] keyB = new long[c];
        for (int j = 0; j < c; j++) {
            keyA[j] = Long.MIN_VALUE;
            keyB[j] = Long.MIN_VALUE;
            for (int l = 0; l < c; l++) {
                if ((l != j || cap[j] >= 2) && gt(pA[j * c + l], pB[j * c + l], 0, keyA[j], keyB[j], 0)) {
                    keyA[j] = pA[j * c + l];
                    keyB[j] = pB[j * c + l];
                }
            }
        }
        work += 3L * c * c; // the keys, and both tables copied in the new order
        int[] inc = bestCounts;
        Arrays.sort(ord, (a, b) -> {
            if (inc[a] != inc[b]) {
                return Integer.compare(inc[b], inc[a]);
            }
            if (lo[a] != lo[b]) {
                return Integer.compare(lo[b], lo[a]);
            }
            if (keyA[a] != keyA[b]) {
                return Long.compare(keyA[b], keyA[a]);
            }
            return Long.compare(keyB[b], keyB[a]);
        });
        int[] perm = new int[c];
        for (int j = 0; j < c; j++) {
            perm[j] = ord[j];
        }
        int[][] mem = new int[c][];
        int[] cp = new int[c];
        int[] l0 = new int[c];
        long[] na = new long[c];
        long[] nbb = new long[c];
        long[][] pp = new long[c][];
        long[] pra = scratch.table(SearchScratch.ORDER_A, c * c);
        long[] prb = scratch.table(SearchScratch.ORDER_B, c * c);
        long[] mpos = new long[c];
        int[] bc = new int[c];
        int[] so = new int[c];
        for (int j = 0; j < c; j++) {
            int o = perm[j];
            mem[j] = members[o];
            cp[j] = cap[o];
            l0[j] = lo[o];
            na[j] = nA[o];
            nbb[j] = nB[o];
            pp[j] = posPrefix[o];
            bc[j] = bestCounts[o];
            mpos[j] = minPos[o];
            so[j] = staticOf[o];
            for (int l = 0; l < c; l++) {
                pra[j * c + l] = pA[o * c + perm[l]];
                prb[j * c + l] = pB[o * c + perm[l]];
            }
        }
        System.arraycopy(mem, 0, members, 0, c);
        System.arraycopy(cp, 0, cap, 0, c);
        System.arraycopy(l0, 0, lo, 0, c);
        System.arraycopy(na, 0, nA, 0, c);
        System.arraycopy(nbb, 0, nB, 0, c);
        System.arraycopy(pp, 0, posPrefix, 0, c);
        // the reordered tables become the pair tables; the old ones are the next search's reordering scratch
        scratch.put(SearchScratch.ORDER_A, pA);
        scratch.put(SearchScratch.ORDER_B, pB);
        scratch.put(SearchScratch.PAIR_A, pra);
        scratch.put(SearchScratch.PAIR_B, prb);
        pA = pra;
        pB = prb;
        System.arraycopy(mpos, 0, minPos, 0, c);
        System.arraycopy(so, 0, staticOf, 0, c);
        bestCounts = bc;
    }

    private void record(long a, long b, long cc) {
        if (!haveFrontier || gt(a, b, cc, fA, fB, fC)) {
            haveFrontier = true;
            fA = a;
            fB = b;
            fC = cc;
        }
    }

    /**
     * @param t      next class to decide
     * @param chosen devices chosen in classes before t
     */
    private void branch(int t, int chosen, long vA, long vB, long vC) {
        int r = k - chosen;
        if (r == 0) {
            for (int j = t; j < c; j++) {
                if (lo[j] > 0) {
                    return;
                }
            }
            if (gt(vA, vB, vC, bA, bB, bC)) {
                bA = vA;
                bB = vB;
                bC = vC;
                bestCounts = counts.clone();
            }
            return;
        }
        if (t == c) {
            return;
        }
        if (!exhausted) {
            nodes++;
            work += c - t;
            if (work > budget) {
                exhausted = true;
            }
        }
        if (exhausted) {
            // not explored: its bound joins the frontier (unless that costs too much: the caller records its own)
            if (frontierWork > budget / 4 + 10_000) {
                loose = true;
                return;
            }
            long before = work;
            if (bound2(t, r)) {
                record(2 * vA + retA, 2 * vB + retB, 2 * vC + retC);
            }
            frontierWork += work - before + c - t;
            return;
        }
        if (!tightTried && nodes >= tightAfter) {
            tightTried = true;
            buildTopPairs();
        }
        if (!bound2(t, r)) {
            return;
        }
        long uA = 2 * vA + retA;
        long uB = 2 * vB + retB;
        long uC = 2 * vC + retC;
        if (!gt(uA, uB, uC, 2 * bA, 2 * bB, 2 * bC)) {
            return;
        }
        int capLeft = 0;
        int loLeft = 0;
        for (int j = t + 1; j < c; j++) {
            capLeft += cap[j];
            loLeft += lo[j];
        }
        int hi = Math.min(cap[t], r - loLeft);
        int low = Math.max(lo[t], r - capLeft);
        for (int m = hi; m >= low; m--) {
            if (exhausted && loose) {
                break;
            }
            long tri = (long) m * (m - 1) / 2;
            long addA = nA[t] * m + pA[t * c + t] * tri + linA[t] * m;
            long addB = nB[t] * m + pB[t * c + t] * tri + linB[t] * m;
            long addC = -posPrefix[t][m];
            counts[t] = m;
            if (m > 0) {
                for (int j = t + 1; j < c; j++) {
                    linA[j] += pA[t * c + j] * m;
                    linB[j] += pB[t * c + j] * m;
                }
            }
            branch(t + 1, chosen + m, vA + addA, vB + addB, vC + addC);
            if (m > 0) {
                for (int j = t + 1; j < c; j++) {
                    linA[j] -= pA[t * c + j] * m;
                    linB[j] -= pB[t * c + j] * m;
                }
            }
        }
        counts[t] = 0;
        if (exhausted && loose) {
            record(uA, uB, uC);
        }
    }

    /** Builds the tighter bound's tables, unless they would exceed {@link #TIGHT_BOUND_ENTRIES}. */
    private void buildTopPairs() {
        long entries = (long) c * c * k;
        // the table, a sort per class and at least k scanned partners per (t, j); the scans are charged as they go
        long sortCost = (long) c * c * (64 - Long.numberOfLeadingZeros(c));
        if (entries > TIGHT_BOUND_ENTRIES || work + 2 * entries + sortCost > budget) {
            return;
        }
        work += entries + sortCost;
        long[] ta = new long[(int) entries];
        long[] tb = new long[(int) entries];
        Integer[] byWeight = new Integer[c];
        for (int j = 0; j < c; j++) {
            for (int l = 0; l < c; l++) {
                byWeight[l] = l;
            }
            int row = j;
            Arrays.sort(byWeight, (a, b) -> pA[row * c + a] != pA[row * c + b]
                    ? Long.compare(pA[row * c + b], pA[row * c + a])
                    : Long.compare(pB[row * c + b], pB[row * c + a]));
            for (int t = 0; t < c; t++) {
                int base = (t * c + j) * k;
                int u = 0;
                long sa = 0;
                long sb = 0;
                int x = 0;
                for (; x < c && u < k - 1; x++) {
                    int l = byWeight[x];
                    if (l < t) {
                        continue;
                    }
                    int units = l == j ? cap[l] - 1 : cap[l];
                    for (int m = 0; m < units && u < k - 1; m++) {
                        sa += pA[j * c + l];
                        sb += pB[j * c + l];
                        u++;
                        ta[base + u] = sa;
                        tb[base + u] = sb;
                    }
                }
                work += x;
                // fewer than k - 1 partners left: larger u are infeasible; the last sum still bounds them
                for (int v = u + 1; v < k; v++) {
                    ta[base + v] = sa;
                    tb[base + v] = sb;
                }
            }
        }
        topA = ta;
        topB = tb;
    }

    /**
     * Twice an upper bound (lexicographic) on what r more devices from classes t..c-1 can add, into retA..retC:
     * each brings at most its linear gain from what is fixed, its node weight, its first position, and half its
     * best pair weights to the r - 1 others (the pairs among new devices sum to half the sum over the devices of
     * their pairs to the others): its r - 1 best partners once the tighter tables exist, else r - 1 times its best
     * one. The r best by that, within the class capacities, lower limits relaxed.
     *
     * @return false when r devices do not fit in classes t..c-1
     */
    private boolean bound2(int t, int r) {
        // a pass over the classes left (a table look-up each, when the tighter tables exist: about 4 units)
        work += (topA != null && r > 1 ? 4L : 1L) * (c - t);
        for (int j = t; j < c; j++) {
            long a = 2 * (linA[j] + nA[j]);
            long b = 2 * (linB[j] + nB[j]);
            if (r > 1) {
                if (topA != null) {
                    a += topA[(t * c + j) * k + (r - 1)];
                    b += topB[(t * c + j) * k + (r - 1)];
                } else {
                    long ma = smA[t * c + j];
                    if (ma != Long.MIN_VALUE) {
                        a += (r - 1) * ma;
                        b += (r - 1) * smB[t * c + j];
                    }
                }
            }
            gA[j] = a;
            gB[j] = b;
            gC[j] = -2 * minPos[j];
            used[j] = false;
        }
        long ta = 0;
        long tb = 0;
        long tc = 0;
        int left = r;
        if (r > 8) {
            // many to pick: a selection (expected linear) instead of r scans
            int len = 0;
            long units = 0;
            for (int j = t; j < c; j++) {
                if (cap[j] > 0) {
                    sel[len++] = j;
                    units += cap[j];
                }
            }
            work += 3L * (c - t);
            if (units < r) {
                return false;
            }
            selectTop(len, r);
            return true;
        }
        while (left > 0) {
            int pick = -1;
            for (int j = t; j < c; j++) {
                if (!used[j] && cap[j] > 0 && (pick < 0 || gt(gA[j], gB[j], gC[j], gA[pick], gB[pick], gC[pick]))) {
                    pick = j;
                }
            }
            work += c - t;
            if (pick < 0) {
                return false;
            }
            used[pick] = true;
            int take = Math.min(left, cap[pick]);
            ta += gA[pick] * take;
            tb += gB[pick] * take;
            tc += gC[pick] * take;
            left -= take;
        }
        retA = ta;
        retB = tb;
        retC = tc;
        return true;
    }

    /**
     * Into retA..retC: the lexicographic sum of the {@code r} best units by (gA, gB, gC) among the classes
     * {@code sel[0..len)}, class j available {@code cap[j]} times (at least r units in all): a three-way
     * quickselect, the same sums as picking the best class r times (equal keys add equal amounts, whichever is
     * taken).
     */
    private void selectTop(int len, int r) {
        long ta = 0;
        long tb = 0;
        long tc = 0;
        long units = r;
        int lo = 0;
        int hi = len;
        while (units > 0 && lo < hi) {
            int p = sel[lo + (hi - lo) / 2];
            long pa = gA[p];
            long pb = gB[p];
            long pc = gC[p];
            int gtEnd = lo;
            int i = lo;
            int ltStart = hi;
            while (i < ltStart) {
                int j = sel[i];
                if (gt(gA[j], gB[j], gC[j], pa, pb, pc)) {
                    sel[i++] = sel[gtEnd];
                    sel[gtEnd++] = j;
                } else if (gt(pa, pb, pc, gA[j], gB[j], gC[j])) {
                    sel[i] = sel[--ltStart];
                    sel[ltStart] = j;
                } else {
                    i++;
                }
            }
            long wg = 0;
            for (int x = lo; x < gtEnd; x++) {
                wg += cap[sel[x]];
            }
            if (wg >= units) {
                hi = gtEnd;
                continue;
            }
            for (int x = lo; x < gtEnd; x++) {
                int j = sel[x];
                ta += gA[j] * cap[j];
                tb += gB[j] * cap[j];
                tc += gC[j] * cap[j];
            }
            units -= wg;
            long weq = 0;
            for (int x = gtEnd; x < ltStart; x++) {
                weq += cap[sel[x]];
            }
            long take = Math.min(units, weq);
            ta += pa * take;
            tb += pb * take;
            tc += pc * take;
            units -= take;
            lo = ltStart;
        }
        retA = ta;
        retB = tb;
        retC = tc;
    }
}
