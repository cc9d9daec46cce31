package io.gpusched.core.strategy;

import io.gpusched.core.DeviceState;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.strategy.TopologyAwareStrategy.Objective;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * The per-class tables of one request, shared by the phases of {@link PlacementSearch} (issue 22 split the search by
 * concern into layers: these tables; {@link IncumbentSearch} the answers found without branching; {@link
 * RootBoundSearch} the certificate's root bound; {@link BranchAndBound} the branch and bound; {@link PlacementSearch}
 * the order of the phases and the certificate). The pool is grouped into classes of interchangeable devices (twins
 * that are both free or both not); a choice of counts {@code m} per class is worth, per key (A, B, C, compared in
 * that order), {@code sum_j m_j node_j + sum_{i<j} m_i m_j pair_ij + sum_j C(m_j, 2) pair_jj}, and C is minus the
 * sum of candidate positions of the first {@code m_j} members of each class. SET: A = set score, B = minus the
 * affinity to what stays free ({@code node = -affinity to every free device}, {@code pair_B = s x (free ends)}).
 * REMAINING: A = set score + score left among the free devices minus the free devices' total ({@code node =
 * -affinity}, {@code pair_A = 2s}), B = set score. Every phase charges its work to {@link #work}, against {@link
 * #budget}.
 */
class SearchTables {

    final int k;

    final int c;

    final int[][] members;

    final int[] cap;

    final int[] lo;

    final long[] nA;

    final long[] nB;

    final long[][] posPrefix;

    long[] pA;

    long[] pB;

    final SearchScratch scratch;

    final List<DeviceState> pool;

    final long budget;

    /** What A lacks of the objective's value (REMAINING: the score among all free devices), for the percentage. */
    final long offsetA;

    long work;

    boolean exhausted;

    final TopologyScores ts;

    /** Static class of each class (in the search's order after {@link BranchAndBound#order()}). */
    final int[] staticOf;

    /** Largest factor between a pair score and its weight in A (REMAINING: 2, both ends free). */
    final long pairFactorA;

    long bA;

    long bB;

    long bC;

    boolean haveBest;

    int[] bestCounts;

    long[] minPos;

    /** Block of each class (compact), or null when blocks do not apply (a class both free and held). */
    final int[] blockOfClass;

    final int nb;

    final int tightAfter;

    final boolean blockSearchAllowed;

    boolean exactByBlocks;

    boolean localSearch = true;

    SearchTables(TopologyScores ts, List<DeviceState> pool, int[] candPos, List<Integer> required,
            List<DeviceState> devices, int k, Objective objective, long budget, int tightAfter,
            boolean blockSearch, SearchScratch scratch) {
        this.scratch = scratch;
        this.tightAfter = tightAfter;
        this.blockSearchAllowed = blockSearch;
        this.pool = pool;
        this.k = k;
        this.budget = budget;
        this.ts = ts;
        this.pairFactorA = objective == Objective.REMAINING ? 2 : 1;
        int sc = ts.classes;
        int[] freeCount = new int[sc];
        for (DeviceState d : devices) {
            if (d.isIdle() && d.isAllocatable()) {
                int p = ts.position(d.index());
                if (p >= 0) {
                    freeCount[ts.classOf[p]]++;
                }
            }
        }
        int n = pool.size();
        int[] dynClass = new int[2 * sc];
        Arrays.fill(dynClass, -1);
        int[] classOfMember = new int[n];
        int[] staticOf = new int[n];
        boolean[] freeOf = new boolean[n];
        int[] size = new int[n];
        int dc = 0;
        for (int i = 0; i < n; i++) {
            DeviceState d = pool.get(i);
            int p = ts.position(d.index());
            if (p < 0) {
                throw new IllegalArgumentException("device " + d.index() + " is not in the topology, which covers "
                        + ts.topology.deviceIndices());
            }
            boolean free = d.isIdle() && d.isAllocatable();
            int key = ts.classOf[p] * 2 + (free ? 1 : 0);
            if (dynClass[key] < 0) {
                dynClass[key] = dc;
                staticOf[dc] = ts.classOf[p];
                freeOf[dc] = free;
                dc++;
            }
            classOfMember[i] = dynClass[key];
            size[dynClass[key]]++;
        }
        c = dc;
        this.staticOf = Arrays.copyOf(staticOf, c);
        members = new int[c][];
        cap = new int[c];
        lo = new int[c];
        for (int j = 0; j < c; j++) {
            members[j] = new int[size[j]];
        }
        // required members first, then pool order (which is candidate order)
        int[] fill = new int[c];
        boolean[] isRequired = new boolean[n];
        for (int i = 0; i < n; i++) {
            if (required.contains(pool.get(i).index())) {
                isRequired[i] = true;
                int j = classOfMember[i];
                members[j][fill[j]++] = i;
                lo[j]++;
            }
        }
        for (int i = 0; i < n; i++) {
            if (!isRequired[i]) {
                int j = classOfMember[i];
                members[j][fill[j]++] = i;
            }
        }
        for (int j = 0; j < c; j++) {
            cap[j] = Math.min(members[j].length, k);
        }
        long[] deg = new long[c];
        try {
            // a member's affinity to the free devices, per static class (its own twin term included once)
            long[] rowFree = freeRows(ts, freeCount, staticOf, c);
            // affinity of a member of each class to every free device but itself
            long maxNode = 0;
            for (int j = 0; j < c; j++) {
                int x = staticOf[j];
                deg[j] = freeOf[j] ? rowFree[x] - ts.classScore[x * sc + x] : rowFree[x];
                maxNode = Math.max(maxNode, deg[j]);
            }
            long total2 = 0;
            for (int x = 0; x < sc; x++) {
                if (freeCount[x] > 0) {
                    total2 = Math.addExact(total2, Math.multiplyExact((long) freeCount[x],
                            rowFree[x] - ts.classScore[x * sc + x]));
                }
            }
            offsetA = objective == Objective.REMAINING ? total2 / 2 : 0;
            // every sum the search forms (doubled bounds included) stays below this
            long maxPair = Math.multiplyExact(2L, ts.maxScore);
            long limit = Math.multiplyExact(8L, Math.addExact(Math.addExact(Math.multiplyExact((long) k, maxNode),
                    Math.multiplyExact(Math.multiplyExact((long) k, k), maxPair)),
                    Math.multiplyExact((long) k, n + (long) candPos.length + 1)));
            if (limit > Long.MAX_VALUE / 4) {
                throw new ArithmeticException("past 2^61");
            }
        } catch (ArithmeticException e) {
            throw new GpuAllocationException(GpuAllocationException.Reason.INVALID_REQUEST, k + " GPUs requested"
                    + " on a node of " + ts.indices.length + " devices whose pair scores reach " + ts.maxScore
                    + ": the placement's sums would not fit a long (" + e.getMessage() + "); ask for fewer GPUs, or"
                    + " describe link counts below 1,000,000 per pair");
        }
        nA = new long[c];
        nB = new long[c];
        posPrefix = new long[c][];
        pA = scratch.table(SearchScratch.PAIR_A, c * c);
        pB = scratch.table(SearchScratch.PAIR_B, c * c);
        work += 2L * c * c + n; // two c x c tables
        for (int j = 0; j < c; j++) {
            int x = staticOf[j];
            if (objective == Objective.SET) {
                nB[j] = -deg[j];
            } else {
                nA[j] = freeOf[j] ? -deg[j] : 0;
            }
            posPrefix[j] = new long[cap[j] + 1];
            for (int m = 0; m < cap[j]; m++) {
                posPrefix[j][m + 1] = posPrefix[j][m] + candPos[members[j][m]];
            }
            int row = x * sc;
            boolean fj = freeOf[j];
            for (int l = 0; l < c; l++) {
                long s = ts.classScore[row + staticOf[l]];
                int ends = (fj ? 1 : 0) + (freeOf[l] ? 1 : 0);
                if (objective == Objective.SET) {
                    pA[j * c + l] = s;
                    pB[j * c + l] = s * ends;
                } else {
                    pA[j * c + l] = ends == 2 ? 2 * s : s;
                    pB[j * c + l] = s;
                }
            }
        }
        boolean mixed = false;
        for (int x = 0; x < sc && !mixed; x++) {
            mixed = dynClass[2 * x] >= 0 && dynClass[2 * x + 1] >= 0;
        }
        if (mixed) {
            blockOfClass = null;
            nb = 0;
        } else {
            // blocks of the topology, split by freeness (pair weights depend on how many ends are free)
            blockOfClass = new int[c];
            int[] compact = new int[2 * ts.blocks];
            Arrays.fill(compact, -1);
            int b = 0;
            for (int j = 0; j < c; j++) {
                int blk = 2 * ts.blockOf[staticOf[j]] + (freeOf[j] ? 1 : 0);
                if (compact[blk] < 0) {
                    compact[blk] = b++;
                }
                blockOfClass[j] = compact[blk];
            }
            nb = b;
        }
        minPos = new long[c];
        for (int j = 0; j < c; j++) {
            long mp = Long.MAX_VALUE;
            for (int i : members[j]) {
                mp = Math.min(mp, candPos[i]);
            }
            minPos[j] = mp;
        }
    }

    static int[] identity(int n) {
        int[] out = new int[n];
        for (int i = 0; i < n; i++) {
            out[i] = i;
        }
        return out;
    }

    /**
     * Per static class that the pool or the free devices use: a member's affinity to every free device, its own
     * twin term counted once ({@code sum_y free_y x classScore[x][y]}). Where fewer classes hold non-free devices
     * than free ones, the topology's full rows minus the non-free devices (cheaper on a mostly free node); else the
     * free devices added up with checked arithmetic. Charges the work it does.
     *
     * @throws ArithmeticException when a sum leaves a long
     */
    long[] freeRows(TopologyScores ts, int[] freeCount, int[] staticOf, int c) {
        int sc = ts.classes;
        boolean[] need = new boolean[sc];
        for (int j = 0; j < c; j++) {
            need[staticOf[j]] = true;
        }
        int nFree = 0;
        int nHeld = 0;
        for (int y = 0; y < sc; y++) {
            if (freeCount[y] > 0) {
                need[y] = true;
                nFree++;
            }
            if (ts.classSize[y] > freeCount[y]) {
                nHeld++;
            }
        }
        boolean subtract = ts.fullRow != null && nHeld < nFree;
        int[] cols = new int[subtract ? nHeld : nFree];
        long[] weight = new long[cols.length];
        int q = 0;
        for (int y = 0; y < sc; y++) {
            int w = subtract ? ts.classSize[y] - freeCount[y] : freeCount[y];
            if (w > 0) {
                cols[q] = y;
                weight[q++] = w;
            }
        }
        long[] out = new long[sc];
        int rows = 0;
        for (int x = 0; x < sc; x++) {
            if (!need[x]) {
                continue;
            }
            rows++;
            int base = x * sc;
            if (subtract) {
                // every term is at most the full row, which fits: no overflow
                long s = ts.fullRow[x];
                for (int i = 0; i < cols.length; i++) {
                    s -= weight[i] * ts.classScore[base + cols[i]];
                }
                out[x] = s;
            } else {
                long s = 0;
                for (int i = 0; i < cols.length; i++) {
                    s = Math.addExact(s, Math.multiplyExact(weight[i], ts.classScore[base + cols[i]]));
                }
                out[x] = s;
            }
        }
        work += (long) rows * cols.length + sc;
        return out;
    }

    List<Integer> answer() {
        List<Integer> out = new ArrayList<>(k);
        int[] picks = new int[k];
        int p = 0;
        for (int j = 0; j < c; j++) {
            for (int m = 0; m < bestCounts[j]; m++) {
                picks[p++] = members[j][m];
            }
        }
        Arrays.sort(picks);
        for (int i : picks) {
            out.add(pool.get(i).index());
        }
        return out;
    }

    /**
     * Adds {@code times} devices of class j to partial sums: {@code s[l] += times x pair(l, j)} for every class l.
     * The pair tables are symmetric, so class j's row is read (in memory order) for its column.
     */
    void addPartner(long[] sA, long[] sB, int j, long times) {
        int row = j * c;
        for (int l = 0; l < c; l++) {
            sA[l] += pA[row + l] * times;
            sB[l] += pB[row + l] * times;
        }
    }

    /**
     * Adds the devices of counts {@code m} to partial sums ({@link #addPartner} per class that gives any); charges
     * nothing (callers charge what their phase documents).
     *
     * @return the number of classes that give devices
     */
    int addPartners(long[] sA, long[] sB, int[] m) {
        int given = 0;
        for (int j = 0; j < c; j++) {
            if (m[j] > 0) {
                addPartner(sA, sB, j, m[j]);
                given++;
            }
        }
        return given;
    }

    void setBest(int[] m) {
        long[] v = value(m);
        bA = v[0];
        bB = v[1];
        bC = v[2];
        haveBest = true;
        bestCounts = m.clone();
    }

    /** @return the value (A, B, C) of a choice of counts, in the search's order after {@link PlacementSearch#run()} */
    long[] value(int[] m) {
        long va = 0;
        long vb = 0;
        long vc = 0;
        // the classes that give devices: at most k of them (a pass over all pairs would cost c^2)
        int[] nz = new int[c];
        int q = 0;
        for (int j = 0; j < c; j++) {
            if (m[j] > 0) {
                nz[q++] = j;
            }
        }
        for (int x = 0; x < q; x++) {
            int j = nz[x];
            long tri = (long) m[j] * (m[j] - 1) / 2;
            va += nA[j] * m[j] + pA[j * c + j] * tri;
            vb += nB[j] * m[j] + pB[j * c + j] * tri;
            vc -= posPrefix[j][m[j]];
            for (int y = x + 1; y < q; y++) {
                int l = nz[y];
                va += pA[j * c + l] * m[j] * m[l];
                vb += pB[j * c + l] * m[j] * m[l];
            }
        }
        return new long[]{va, vb, vc};
    }

    /** @return whether (a1, b1, c1) is lexicographically larger than (a2, b2, c2) */
    static boolean gt(long a1, long b1, long c1, long a2, long b2, long c2) {
        return a1 != a2 ? a1 > a2 : b1 != b2 ? b1 > b2 : c1 > c2;
    }
}
