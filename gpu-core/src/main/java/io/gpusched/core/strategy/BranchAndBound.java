package io.gpusched.core.strategy;

import static io.gpusched.core.strategy.TopologyAwareStrategy.TIGHT_BOUND_ENTRIES;

import io.gpusched.core.DeviceState;
import io.gpusched.core.strategy.TopologyAwareStrategy.Objective;
import java.util.Arrays;
import java.util.List;

/**
 * The branch and bound of {@link PlacementSearch}: classes in a search order (the incumbent's first), how many each
 * gives decided class by class, a branch cut when twice its bound ({@link #bound2}: each device's linear gain, node
 * weight and best partners; the tighter per-(class, count) table once the search proves not trivial) cannot beat the
 * incumbent. Once the budget is spent, the unexplored branches' bounds form the frontier that the certificate reads.
 */
class BranchAndBound extends RootBoundSearch {

    BranchAndBound(TopologyScores ts, List<DeviceState> pool, int[] candPos, List<Integer> required,
            List<DeviceState> devices, int k, Objective objective, long budget, int tightAfter,
            boolean blockSearch, SearchScratch scratch) {
        super(ts, pool, candPos, required, devices, k, objective, budget, tightAfter, blockSearch, scratch);
    }

    int nodes;

    long frontierWork;

    boolean loose;

    boolean haveFrontier;

    long fA;

    long fB;

    long fC;

    int[] counts;

    long[] linA;

    long[] linB;

    long[] smA;

    long[] smB;

    long[] gA;

    long[] gB;

    long[] gC;

    boolean[] used;

    int[] sel;

    long retA;

    long retB;

    long retC;

    /** Per (t, j, u): the largest sum (A, B) of u partner pair weights of one class-j device among classes t.. */
    long[] topA;

    long[] topB;

    boolean tightTried;

    /** Scratch of the branch and bound, allocated only when it runs. */
    void prepareBranchAndBound() {
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

    /** Search order: the incumbent's classes first (most devices first), then the rest by their best pair. */
    void order() {
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

    void record(long a, long b, long cc) {
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
    void branch(int t, int chosen, long vA, long vB, long vC) {
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

    /**
     * Builds the tighter bound's tables, unless they would exceed
     * {@link TopologyAwareStrategy#TIGHT_BOUND_ENTRIES}.
     */
    void buildTopPairs() {
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
    boolean bound2(int t, int r) {
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
    void selectTop(int len, int r) {
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
