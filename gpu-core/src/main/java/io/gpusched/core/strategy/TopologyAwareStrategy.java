package io.gpusched.core.strategy;

import io.gpusched.core.AllocationStrategy;
import io.gpusched.core.DeviceState;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.SchedulingView;
import io.gpusched.core.SharingMode;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;

/**
 * Picks GPUs by their links ({@link PairScore}: NVLink/XGMI links, then PCIe proximity), for one of two named
 * {@link Objective objectives}:
 * <ul>
 *   <li>{@link Objective#SET} ({@value #NAME}, the default): the set that talks best, the largest sum of pair scores
 *       over its pairs; among equals, the one with the least affinity to the GPUs that stay free (a 1-GPU request takes
 *       a GPU whose partners are busy rather than break an intact pair);</li>
 *   <li>{@link Objective#REMAINING} ({@value #REMAINING_NAME}): what is left for the next job: the largest sum of the
 *       set's own pair scores and those left among the free GPUs (equivalently, the set that cuts the least link score
 *       to what stays free); among equals, the set's own score. This is go-gpuallocator's best-effort objective
 *       whenever the remaining GPUs form one group (at most {@code 2 x count} free GPUs); see docs/PERFORMANCE.md.</li>
 * </ul>
 * The last tie-break, for both, is candidate order (the smallest sum of positions in {@link SchedulingView#candidates()}).
 * Required devices ({@link GpuRequest#requiredDevices()}) are always in the answer and the rest is chosen by the same
 * objective, so it is best connected to them. The search is exact and chooses how many devices each class of twins
 * gives ({@link TopologyScores}: partitions of one GPU are interchangeable). Where the classes fall into few blocks
 * (classes with one score to every other class, such as the packages of one NUMA node), a knapsack per block and every
 * split of the count over the blocks; elsewhere a branch and bound bounded by the best possible gain of the devices
 * still to add (after {@value #TIGHT_BOUND_AFTER} nodes, each device's best partners among them), which gives up at
 * {@value #NODE_BUDGET} search nodes and returns the best set found (no node of the test corpora comes near; on 64 GPUs
 * with random links between all of them, requests of 12 or more GPUs can reach it: such an answer is not proven best). Explicit device ids are returned as asked; a NUMA
 * preference restricts the search to that node when it can hold the request; shared requests prefer GPUs already
 * shared and always use the {@link Objective#SET} objective (a shared GPU stays usable by others).
 */
public final class TopologyAwareStrategy implements AllocationStrategy {

    /** Configuration name of the {@link Objective#SET} objective. */
    public static final String NAME = "topology";
    /** Configuration name of the {@link Objective#REMAINING} objective. */
    public static final String REMAINING_NAME = "topology-remaining";
    /** Search nodes after which the branch and bound stops and returns the best set found. */
    public static final int NODE_BUDGET = 2_000_000;
    /** Most splits of a request over blocks of classes enumerated by the block search. */
    static final int BLOCK_COMPOSITIONS = 20_000;
    /**
     * Search nodes after which the branch and bound builds its tighter bound (each device's best r - 1 partners rather
     * than r - 1 times its best one): a table of classes x classes x count, worth building only once the search has
     * shown it is not trivial.
     */
    static final int TIGHT_BOUND_AFTER = 2_048;
    /** Largest table (entries) the tighter bound may build; larger searches keep the plain bound. */
    static final int TIGHT_BOUND_ENTRIES = 1 << 22;

    /** What the topology strategy maximizes. */
    public enum Objective {
        /** The set's own connectivity: the sum of pair scores over its pairs; ties by least affinity to what stays. */
        SET,
        /** What is left for the next job: set score plus the score left among the free GPUs; ties by set score. */
        REMAINING
    }

    private final Objective objective;
    private volatile TopologyScores scores;

    /** The {@link Objective#SET} objective. */
    public TopologyAwareStrategy() {
        this(Objective.SET);
    }

    /** @param objective what to maximize */
    public TopologyAwareStrategy(Objective objective) {
        this.objective = Objects.requireNonNull(objective, "objective");
    }

    /** @return the objective */
    public Objective objective() {
        return objective;
    }

    @Override
    public String name() {
        return objective == Objective.SET ? NAME : REMAINING_NAME;
    }

    @Override
    public List<Integer> select(GpuRequest request, SchedulingView view) {
        List<DeviceState> cands = view.candidates();
        int k = request.count();
        if (cands.size() < k) {
            return List.of();
        }
        if (request.isExplicit()) {
            return cands.stream().map(DeviceState::index).toList();
        }
        List<Integer> required = request.requiredDevices();
        for (int r : required) {
            if (cands.stream().noneMatch(d -> d.index() == r)) {
                return List.of();
            }
        }
        List<DeviceState> pool = cands;
        if (request.sharing() == SharingMode.SHARED) {
            List<DeviceState> shared = pool.stream()
                    .filter(d -> d.isShared() || required.contains(d.index())).toList();
            if (shared.size() >= k) {
                pool = shared;
            }
        }
        if (request.preferredNuma().isPresent()) {
            int numa = request.preferredNuma().getAsInt();
            GpuTopology t = view.topology();
            List<DeviceState> local = pool.stream().filter(d -> required.contains(d.index())
                    || (t.numaNode(d.index()).isPresent() && t.numaNode(d.index()).getAsInt() == numa)).toList();
            if (local.size() >= k) {
                pool = local;
            }
        }
        Objective o = request.sharing() == SharingMode.SHARED ? Objective.SET : objective;
        Search s = new Search(scores(view.topology()), pool, required, view.devices(), k, o);
        return s.run();
    }

    private TopologyScores scores(GpuTopology topology) {
        TopologyScores s = scores;
        if (s == null || s.topology != topology) {
            s = new TopologyScores(topology);
            scores = s;
        }
        return s;
    }

    /**
     * One request: the pool grouped into classes of interchangeable devices (twins that are both free or both not),
     * and a branch and bound over how many each class gives. The value of a choice of counts {@code m} is
     * {@code sum_j m_j * node_j - pos_j(m_j) + sum_{i<j} m_i m_j pair_ij + sum_j C(m_j, 2) pair_jj}, every objective
     * and its tie-breaks folded into one long by weights.
     */
    static final class Search {
        private final int k;
        private final int c;
        private final int[][] members;
        private final int[] cap;
        private final int[] lo;
        private final long[] node;
        private final long[][] posPrefix;
        private final long[] pair;
        private final List<DeviceState> pool;
        private int nodes;
        private long best = Long.MIN_VALUE;
        private int[] bestCounts;
        private int[] counts;
        private long[] lin;
        private long[] suffixMaxPair;
        private long[] minPos;
        private Integer[] orderScratch;
        /** Block of each class (compact), or null when blocks do not apply (a class both free and held). */
        private final int[] blockOfClass;
        private final int nb;
        /** Search nodes after which the tighter bound is built ({@link #TIGHT_BOUND_AFTER}; tests move it). */
        private final int tightAfter;
        /**
         * {@code topPairs[(t * c + j) * k + u]}: the largest sum of pair weights one device of class j has to u other
         * devices of classes t..c-1 (class capacities respected); null until built.
         */
        private long[] topPairs;
        private boolean tightTried;
        private final boolean blockSearchAllowed;

        Search(TopologyScores ts, List<DeviceState> pool, List<Integer> required, List<DeviceState> devices, int k,
               Objective objective) {
            this(ts, pool, required, devices, k, objective, TIGHT_BOUND_AFTER, true);
        }

        /** For tests: when the tighter bound is built, and whether the block search may answer. */
        Search(TopologyScores ts, List<DeviceState> pool, List<Integer> required, List<DeviceState> devices, int k,
               Objective objective, int tightAfter, boolean blockSearch) {
            this.tightAfter = tightAfter;
            this.blockSearchAllowed = blockSearch;
            this.pool = pool;
            this.k = k;
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
            members = new int[c][];
            cap = new int[c];
            lo = new int[c];
            for (int j = 0; j < c; j++) {
                members[j] = new int[size[j]];
            }
            // required members first, then pool order
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
            // affinity of a member of each class to the free devices (its "damage")
            long[] deg = new long[c];
            long maxDeg = 0;
            for (int j = 0; j < c; j++) {
                long s = 0;
                int x = staticOf[j];
                for (int y = 0; y < sc; y++) {
                    s += (long) freeCount[y] * ts.classScore[x * sc + y];
                }
                if (freeOf[j]) {
                    s -= ts.classScore[x * sc + x];
                }
                deg[j] = s;
                maxDeg = Math.max(maxDeg, s);
            }
            long pairs = (long) k * (k - 1) / 2;
            long sMax = pairs * ts.maxScore + 1;
            long dMax = k * maxDeg + 1;
            long pMax = (long) k * n + 1;
            long pairW;
            long nodeW;
            long posW = 1;
            if (objective == Objective.SET) {
                // value = (score * dMax - damage) * pMax - positions
                if (overflows(sMax, dMax, pMax)) {
                    pMax = 1;
                    posW = 0;
                }
                pairW = dMax * pMax;
                nodeW = -pMax;
            } else {
                // value = ((2 score - damage) * sMax + score) * pMax - positions
                long range = 2 * sMax + dMax;
                if (overflows(range, sMax, pMax)) {
                    pMax = 1;
                    posW = 0;
                }
                pairW = (2 * sMax + 1) * pMax;
                nodeW = -sMax * pMax;
            }
            node = new long[c];
            posPrefix = new long[c][];
            pair = new long[c * c];
            for (int j = 0; j < c; j++) {
                node[j] = nodeW * deg[j];
                posPrefix[j] = new long[cap[j] + 1];
                for (int m = 0; m < cap[j]; m++) {
                    posPrefix[j][m + 1] = posPrefix[j][m] + posW * members[j][m];
                }
                for (int l = 0; l < c; l++) {
                    pair[j * c + l] = pairW * ts.classScore[staticOf[j] * sc + staticOf[l]];
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
                blockOfClass = new int[c];
                int[] compact = new int[ts.blocks];
                Arrays.fill(compact, -1);
                int b = 0;
                for (int j = 0; j < c; j++) {
                    int blk = ts.blockOf[staticOf[j]];
                    if (compact[blk] < 0) {
                        compact[blk] = b++;
                    }
                    blockOfClass[j] = compact[blk];
                }
                nb = b;
            }
            this.posW = posW;
        }

        private final long posW;

        /** Scratch of the branch and bound, allocated only when it runs. */
        private void prepareBranchAndBound() {
            minPos = new long[c];
            for (int j = 0; j < c; j++) {
                long mp = Long.MAX_VALUE;
                for (int i : members[j]) {
                    mp = Math.min(mp, posW * i);
                }
                minPos[j] = mp;
            }
            counts = new int[c];
            lin = new long[c];
            suffixMaxPair = new long[c * (c + 1)];
            orderScratch = new Integer[c];
        }

        private static boolean overflows(long a, long b, long p) {
            try {
                Math.multiplyExact(Math.multiplyExact(Math.multiplyExact(a, b), p), 4L);
                return false;
            } catch (ArithmeticException e) {
                return true;
            }
        }

        List<Integer> run() {
            int need = k;
            for (int j = 0; j < c; j++) {
                need -= lo[j];
            }
            if (need < 0) {
                return List.of();
            }
            if (blockSearchAllowed && blockOfClass != null && compositions(nb, k) <= BLOCK_COMPOSITIONS) {
                blockSearch();
                return answer();
            }
            prepareBranchAndBound();
            greedy();
            order();
            // suffix maxima of the pair weight, for the bound: best partner of class j among classes t..c-1
            for (int t = c; t >= 0; t--) {
                for (int j = 0; j < c; j++) {
                    long m = Long.MIN_VALUE;
                    if (t < c) {
                        m = suffixMaxPair[(t + 1) * c + j];
                        int l = t;
                        if (l != j || cap[j] >= 2) {
                            m = Math.max(m, pair[j * c + l]);
                        }
                    }
                    suffixMaxPair[t * c + j] = m;
                }
            }
            Arrays.fill(counts, 0);
            Arrays.fill(lin, 0);
            branch(0, 0, 0);
            return answer();
        }

        private List<Integer> answer() {
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

        /** Value of m devices of class j on their own: node weights, positions and the pairs among them. */
        private long own(int j, int m) {
            return node[j] * m - posPrefix[j][m] + pair[j * c + j] * m * (m - 1) / 2;
        }

        /**
         * Exact search where the classes fall into few blocks: within a block every two classes have one pair weight w,
         * so a block's value given its total M is {@code w C(M,2)} plus a sum over its classes of
         * {@code own(m) - w C(m,2)}, maximized by a knapsack over the classes; then every split of k over the blocks.
         */
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
            long[] wIn = new long[nb];
            long[] wx = new long[nb * nb];
            for (int b = 0; b < nb; b++) {
                wIn[b] = cls[b].length >= 2 ? pair[cls[b][0] * c + cls[b][1]] : 0;
                for (int b2 = 0; b2 < nb; b2++) {
                    wx[b * nb + b2] = b == b2 ? 0 : pair[cls[b][0] * c + cls[b2][0]];
                }
            }
            long neg = Long.MIN_VALUE / 4;
            long[][] value = new long[nb][];
            int[][][] choice = new int[nb][][];
            for (int b = 0; b < nb; b++) {
                long[] cur = new long[k + 1];
                Arrays.fill(cur, neg);
                cur[0] = 0;
                choice[b] = new int[cls[b].length][k + 1];
                for (int x = 0; x < cls[b].length; x++) {
                    int j = cls[b][x];
                    long[] nxt = new long[k + 1];
                    Arrays.fill(nxt, neg);
                    for (int mTot = 0; mTot <= k; mTot++) {
                        for (int m = lo[j]; m <= Math.min(cap[j], mTot); m++) {
                            if (cur[mTot - m] == neg) {
                                continue;
                            }
                            long v = cur[mTot - m] + own(j, m) - wIn[b] * m * (m - 1) / 2;
                            if (v > nxt[mTot]) {
                                nxt[mTot] = v;
                                choice[b][x][mTot] = m;
                            }
                        }
                    }
                    cur = nxt;
                }
                for (int mTot = 0; mTot <= k; mTot++) {
                    if (cur[mTot] != neg) {
                        cur[mTot] += wIn[b] * mTot * (mTot - 1) / 2;
                    }
                }
                value[b] = cur;
            }
            int[] split = new int[nb];
            int[] bestSplit = new int[nb];
            best = Long.MIN_VALUE;
            splits(0, k, 0, split, bestSplit, value, wx, new long[nb], neg);
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

        private void splits(int b, int left, long v, int[] split, int[] bestSplit, long[][] value, long[] wx, long[] cross,
                            long neg) {
            if (b == nb) {
                if (left == 0 && v > best) {
                    best = v;
                    System.arraycopy(split, 0, bestSplit, 0, nb);
                }
                return;
            }
            for (int m = 0; m <= left; m++) {
                if (value[b][m] == neg) {
                    continue;
                }
                split[b] = m;
                long add = value[b][m] + cross[b] * m;
                for (int b2 = b + 1; b2 < nb; b2++) {
                    cross[b2] += wx[b * nb + b2] * m;
                }
                splits(b + 1, left - m, v + add, split, bestSplit, value, wx, cross, neg);
                for (int b2 = b + 1; b2 < nb; b2++) {
                    cross[b2] -= wx[b * nb + b2] * m;
                }
            }
        }

        /** Incumbent: the required devices, then one device at a time by the best marginal gain. */
        private void greedy() {
            int[] m = lo.clone();
            int chosen = 0;
            for (int j = 0; j < c; j++) {
                chosen += m[j];
            }
            while (chosen < k) {
                int pick = -1;
                long g = Long.MIN_VALUE;
                for (int j = 0; j < c; j++) {
                    if (m[j] >= cap[j]) {
                        continue;
                    }
                    long gain = node[j] - (posPrefix[j][m[j] + 1] - posPrefix[j][m[j]]);
                    for (int l = 0; l < c; l++) {
                        gain += pair[j * c + l] * m[l];
                    }
                    if (gain > g) {
                        g = gain;
                        pick = j;
                    }
                }
                m[pick]++;
                chosen++;
            }
            best = value(m);
            bestCounts = m;
        }

        /** @return the value of the answer {@link #run()} chose, in the search's own weights */
        long bestValue() {
            return best;
        }

        /** @return search nodes {@link #run()} visited (0 when the block search answered) */
        int nodesVisited() {
            return nodes;
        }

        /** @return whether the tighter bound was built during {@link #run()} */
        boolean usedTightBound() {
            return topPairs != null;
        }

        /** @return per class (in the search's order after {@link #run()}): fewest and most devices it may give */
        int[][] classLimits() {
            return new int[][] {lo.clone(), cap.clone()};
        }

        long value(int[] m) {
            long v = 0;
            for (int j = 0; j < c; j++) {
                v += node[j] * m[j] - posPrefix[j][m[j]] + pair[j * c + j] * m[j] * (m[j] - 1) / 2;
                for (int l = j + 1; l < c; l++) {
                    v += pair[j * c + l] * m[j] * m[l];
                }
            }
            return v;
        }

        /** Search order: the incumbent's classes first (most devices first), then the rest by their best pair. */
        private void order() {
            for (int j = 0; j < c; j++) {
                orderScratch[j] = j;
            }
            long[] key = new long[c];
            for (int j = 0; j < c; j++) {
                long bestPair = Long.MIN_VALUE;
                for (int l = 0; l < c; l++) {
                    if (l != j || cap[j] >= 2) {
                        bestPair = Math.max(bestPair, pair[j * c + l]);
                    }
                }
                key[j] = bestPair;
            }
            int[] inc = bestCounts;
            Arrays.sort(orderScratch, (a, b) -> {
                if (inc[a] != inc[b]) {
                    return Integer.compare(inc[b], inc[a]);
                }
                if (lo[a] != lo[b]) {
                    return Integer.compare(lo[b], lo[a]);
                }
                return Long.compare(key[b], key[a]);
            });
            permute();
        }

        /** Reorders every per-class array by {@link #orderScratch}. */
        private void permute() {
            int[] perm = new int[c];
            for (int j = 0; j < c; j++) {
                perm[j] = orderScratch[j];
            }
            int[][] mem = new int[c][];
            int[] cp = new int[c];
            int[] l0 = new int[c];
            long[] nd = new long[c];
            long[][] pp = new long[c][];
            long[] pr = new long[c * c];
            long[] mpos = new long[c];
            int[] bc = new int[c];
            for (int j = 0; j < c; j++) {
                int o = perm[j];
                mem[j] = members[o];
                cp[j] = cap[o];
                l0[j] = lo[o];
                nd[j] = node[o];
                pp[j] = posPrefix[o];
                bc[j] = bestCounts[o];
                mpos[j] = minPos[o];
                for (int l = 0; l < c; l++) {
                    pr[j * c + l] = pair[o * c + perm[l]];
                }
            }
            System.arraycopy(mem, 0, members, 0, c);
            System.arraycopy(cp, 0, cap, 0, c);
            System.arraycopy(l0, 0, lo, 0, c);
            System.arraycopy(nd, 0, node, 0, c);
            System.arraycopy(pp, 0, posPrefix, 0, c);
            System.arraycopy(pr, 0, pair, 0, c * c);
            System.arraycopy(mpos, 0, minPos, 0, c);
            bestCounts = bc;
        }

        /**
         * @param t      next class to decide
         * @param chosen devices chosen in classes before t
         * @param v      value of the choice so far
         */
        private void branch(int t, int chosen, long v) {
            if (++nodes > NODE_BUDGET) {
                return;
            }
            int r = k - chosen;
            if (r == 0) {
                for (int j = t; j < c; j++) {
                    if (lo[j] > 0) {
                        return;
                    }
                }
                if (v > best) {
                    best = v;
                    bestCounts = counts.clone();
                }
                return;
            }
            if (t == c) {
                return;
            }
            if (!tightTried && nodes >= tightAfter) {
                tightTried = true;
                buildTopPairs();
            }
            if (v + (topPairs != null ? tightBound(t, r) : bound(t, r)) <= best) {
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
                long add = node[t] * m - posPrefix[t][m] + pair[t * c + t] * m * (m - 1) / 2 + lin[t] * m;
                counts[t] = m;
                if (m > 0) {
                    for (int j = t + 1; j < c; j++) {
                        lin[j] += pair[t * c + j] * m;
                    }
                }
                branch(t + 1, chosen + m, v + add);
                if (m > 0) {
                    for (int j = t + 1; j < c; j++) {
                        lin[j] -= pair[t * c + j] * m;
                    }
                }
            }
            counts[t] = 0;
        }

        /** Builds {@link #topPairs} (after {@link #permute()}), unless it would exceed {@link #TIGHT_BOUND_ENTRIES}. */
        private void buildTopPairs() {
            long entries = (long) c * c * k;
            if (entries > TIGHT_BOUND_ENTRIES) {
                return;
            }
            long[] table = new long[(int) entries];
            Integer[] byWeight = new Integer[c];
            for (int j = 0; j < c; j++) {
                for (int l = 0; l < c; l++) {
                    byWeight[l] = l;
                }
                int row = j;
                Arrays.sort(byWeight, (a, b) -> Long.compare(pair[row * c + b], pair[row * c + a]));
                for (int t = 0; t < c; t++) {
                    int base = (t * c + j) * k;
                    int u = 0;
                    long sum = 0;
                    for (int x = 0; x < c && u < k - 1; x++) {
                        int l = byWeight[x];
                        if (l < t) {
                            continue;
                        }
                        int units = l == j ? cap[l] - 1 : cap[l];
                        long w = pair[j * c + l];
                        for (int m = 0; m < units && u < k - 1; m++) {
                            sum += w;
                            table[base + ++u] = sum;
                        }
                    }
                    // fewer than k - 1 partners left: every larger u is infeasible; keep the last sum (still an upper
                    // bound of what any feasible choice reaches, since none has that many partners)
                    for (int v = u + 1; v < k; v++) {
                        table[base + v] = sum;
                    }
                }
            }
            topPairs = table;
        }

        /**
         * Like {@link #bound}, but each device's pairs with the other r - 1 new devices are bounded by its r - 1 best
         * partners among classes t..c-1 (class capacities respected), half of each pair to either end: the pairs among
         * the new devices sum to half the sum over devices of their pair weights to the others, each at most its best
         * r - 1. Doubled values until the end so the halves stay exact.
         */
        private long tightBound(int t, int r) {
            int len = c - t;
            long[] gain = new long[len];
            for (int j = t; j < c; j++) {
                long g = 2 * (lin[j] + node[j] - minPos[j]);
                if (r > 1) {
                    g += topPairs[(t * c + j) * k + (r - 1)];
                }
                gain[j - t] = g;
            }
            long total = bestUnits(gain, t, r);
            return total == Long.MIN_VALUE / 4 ? total : Math.floorDiv(total, 2);
        }

        /** @return the sum of the r best unit gains under the class capacities of t.., or a very low value if r do not fit */
        private long bestUnits(long[] gain, int t, int r) {
            int len = gain.length;
            boolean[] used = new boolean[len];
            long total = 0;
            int left = r;
            while (left > 0) {
                int b = -1;
                for (int j = 0; j < len; j++) {
                    if (!used[j] && cap[t + j] > 0 && (b < 0 || gain[j] > gain[b])) {
                        b = j;
                    }
                }
                if (b < 0) {
                    return Long.MIN_VALUE / 4;
                }
                used[b] = true;
                int take = Math.min(left, cap[t + b]);
                total += gain[b] * take;
                left -= take;
            }
            return total;
        }

        /**
         * An upper bound on what r more devices from classes t..c-1 can add: each brings at most its linear gain from
         * what is fixed, its node weight, its first position, and half its best pair weight to each of the r - 1 others
         * (a pair among new devices is worth at most the mean of its two ends' best pairs); the r best by that, within
         * the class capacities, lower bounds relaxed.
         */
        private long bound(int t, int r) {
            int len = c - t;
            long[] gain = new long[len];
            for (int j = t; j < c; j++) {
                long g = lin[j] + node[j] - minPos[j];
                long mp = suffixMaxPair[t * c + j];
                if (r > 1 && mp != Long.MIN_VALUE) {
                    g += (r - 1) * Math.max(mp, 0) / 2 + ((r - 1) * Math.max(mp, 0)) % 2;
                }
                gain[j - t] = g;
            }
            return bestUnits(gain, t, r);
        }
    }
}
