package io.gpusched.core.strategy;

import static io.gpusched.core.strategy.TopologyAwareStrategy.BLOCK_COMPOSITIONS;

import io.gpusched.core.DeviceState;
import io.gpusched.core.strategy.TopologyAwareStrategy.Objective;
import java.util.List;

/**
 * The answers {@link PlacementSearch} finds without branching: the exact searches where the classes fall into few
 * blocks (a knapsack per block, every split over the blocks) or at most two devices are left to choose (every class,
 * every pair of classes), and otherwise the incumbent: a greedy start, its restarts from every class, and a local
 * search of one-device moves. Every step charges its work to the tables' budget.
 */
class IncumbentSearch extends SearchTables {

    IncumbentSearch(TopologyScores ts, List<DeviceState> pool, int[] candPos, List<Integer> required,
            List<DeviceState> devices, int k, Objective objective, long budget, int tightAfter,
            boolean blockSearch, SearchScratch scratch) {
        super(ts, pool, candPos, required, devices, k, objective, budget, tightAfter, blockSearch, scratch);
    }

    long blockWork() {
        // the splits' recursion: at most about nb nodes per composition, and a cross update per device placed
        long w = compositions(nb, k) * (Math.max(1, nb) + (long) k * nb) + (long) nb * nb;
        for (int j = 0; j < c; j++) {
            w += (long) (cap[j] + 1) * (k + 1);
        }
        return w;
    }

    /** @return the number of ways to split k into b ordered parts, capped */
    static long compositions(int b, int k) {
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
    void blockSearch() {
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

    void splits(int b, int left, long va, long vb, long vc, int[] split, int[] bestSplit,
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
    void pairSearch(int need) {
        setBest(bestAdditions(lo.clone(), need));
    }

    /**
     * @return {@code m} with the best one or two devices ({@code need}) added to it, by a scan of every pair of
     *         classes (c^2/2 units): exact for at most two devices to choose, and the greedy's best start
     */
    private int[] bestAdditions(int[] m, int need) {
        long[] sA = new long[c];
        long[] sB = new long[c];
        work += (long) c * addPartners(sA, sB, m);
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
        return m;
    }

    /**
     * Incumbent: the required devices, then one device at a time by the best marginal gain. When the search ends
     * early, {@link #restarts()} runs it again from every class as its first free choice (a plain greedy's first
     * pick decides much of a small set) where that fits an eighth of the budget, and keeps the best.
     */
    void greedy() {
        setBest(greedyFrom(-1));
        int need = k;
        for (int j = 0; j < c; j++) {
            need -= lo[j];
        }
        if (need >= 2 && 2L * need * c <= budget / 8) {
            // from the best pair too (c^2/2 units, less than the tables, then a second greedy within an eighth of the
            // budget): a plain greedy's first pick by node weight misses a pair far better linked than any other (on
            // 1,024 devices, k = 3: half the optimum); a large set depends less on its first pick
            int[] m = greedyFrom(bestAdditions(lo.clone(), 2));
            long[] v = value(m);
            if (gt(v[0], v[1], v[2], bA, bB, bC)) {
                setBest(m);
            }
        }
    }

    /** A search that ended early: the greedy again from every class (see {@link #greedy()}) may find better. */
    void restarts() {
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
    int[] greedyFrom(int seed) {
        return greedyFrom(lo.clone(), seed);
    }

    /** @return the greedy's counts from the counts {@code start} (at least the required ones) */
    private int[] greedyFrom(int[] start) {
        return greedyFrom(start, -1);
    }

    private int[] greedyFrom(int[] start, int seed) {
        int[] m = start;
        long[] sA = new long[c];
        long[] sB = new long[c];
        addPartners(sA, sB, m);
        int chosen = 0;
        for (int j = 0; j < c; j++) {
            chosen += m[j];
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
    void localSearch() {
        int[] m = bestCounts.clone();
        long[] sA = new long[c];
        long[] sB = new long[c];
        addPartners(sA, sB, m);
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
}
