package io.gpusched.core.strategy;

import static io.gpusched.core.strategy.TopologyAwareStrategy.EXACT;
import static io.gpusched.core.strategy.TopologyAwareStrategy.LAGRANGE_EXACT_UNITS;

import io.gpusched.core.DeviceState;
import io.gpusched.core.strategy.TopologyAwareStrategy.Objective;
import java.util.List;

/**
 * The certificate's root bound for {@link PlacementSearch}: an upper bound on the first key (A) of any answer that
 * holds with nothing explored, for a search that ends early. Each device brings at most its node weight and its k - 1
 * best partner shares; from the pool's own rows with the pair weights split between their ends by Lagrangian
 * subgradient steps, else from the topology's table of best partners, else from the largest pair weight.
 */
class RootBoundSearch extends IncumbentSearch {

    RootBoundSearch(TopologyScores ts, List<DeviceState> pool, int[] candPos, List<Integer> required,
            List<DeviceState> devices, int k, Objective objective, long budget, int tightAfter,
            boolean blockSearch, SearchScratch scratch) {
        super(ts, pool, candPos, required, devices, k, objective, budget, tightAfter, blockSearch, scratch);
    }

    /** Whether {@link #rootBound()} ran, and its bound (twice an upper bound on A). */
    boolean haveRootBound;

    long rootBoundA2;

    /** Budget ran out before the branch and bound: the only bound is the root's (the whole search unexplored). */
    void rootFrontier() {
        rootBound();
    }

    /**
     * Twice an upper bound on the first key (A) of any answer, into {@link #rootBoundA2}: every device brings at
     * most twice its node weight plus its k - 1 best partner weights (within the class capacities; the pairs among
     * the k devices sum to half of that over the devices), and an answer is at most the k best devices by that.
     * The partners come from the pool's own rows where the 3 c^2 units a selection per class costs are at most an
     * eighth of the budget (always with {@link TopologyAwareStrategy#EXACT}), else from the topology's table of best
     * partners among all
     * its devices (looser: it counts held devices too), else each partner is taken at the largest pair weight.
     */
    void rootBound() {
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
    long lagrangianBound2(long units) {
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

    static void swap(long[] v, int[] w, int a, int b) {
        long tv = v[a];
        v[a] = v[b];
        v[b] = tv;
        int tw = w[a];
        w[a] = w[b];
        w[b] = tw;
    }
}
