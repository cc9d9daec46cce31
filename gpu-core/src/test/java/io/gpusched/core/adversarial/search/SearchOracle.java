package io.gpusched.core.adversarial.search;

import io.gpusched.core.DeviceState;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.PcieLevel;
import io.gpusched.core.SchedulingView;
import io.gpusched.core.SharingMode;
import io.gpusched.core.strategy.SearchProbe;
import io.gpusched.core.strategy.TopologyAwareStrategy.Objective;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

/**
 * An exact checker for the topology strategy written from its documented objectives only (class Javadoc of
 * TopologyAwareStrategy): every k-subset of the pool that holds the required devices is enumerated and scored with a
 * pair score computed here in {@code long} from {@link GpuTopology}'s public API (100 per NVLink/XGMI link plus the PCIe
 * term), never with {@code PairScore} nor with the strategy's search.
 *
 * <p>Keys, compared lexicographically, larger better:
 * <ul>
 *   <li>SET: (set score, -affinity of the set to the GPUs that stay free, -sum of candidate positions);</li>
 *   <li>REMAINING: (set score + score left among the GPUs that stay free, set score, -sum of candidate positions).</li>
 * </ul>
 * "Free" is a device nobody holds that is healthy and in the pool; "stay free" is free and not in the set.
 */
final class SearchOracle {

    private SearchOracle() {
    }

    static long pcie(PcieLevel l) {
        return switch (l) {
            case INTERNAL -> 60;
            case SINGLE -> 50;
            case MULTIPLE -> 40;
            case HOSTBRIDGE -> 30;
            case NODE -> 20;
            case SYSTEM -> 10;
        };
    }

    static long pair(GpuTopology t, int a, int b) {
        return 100L * t.linkCount(a, b) + pcie(t.pcieLevel(a, b));
    }

    static boolean isFree(DeviceState d) {
        return d.exclusiveHolder().isEmpty() && d.sharedHolders() == 0 && d.health().isHealthy()
                && d.pool() == DeviceState.Pool.IN_POOL;
    }

    /** The pool the documented rules give: shared prefers shared GPUs when enough; NUMA restricts when it can hold. */
    static List<DeviceState> pool(GpuRequest req, SchedulingView v) {
        List<DeviceState> pool = v.candidates();
        List<Integer> required = req.requiredDevices();
        if (req.sharing() == SharingMode.SHARED) {
            List<DeviceState> shared = pool.stream()
                    .filter(d -> d.sharedHolders() > 0 || required.contains(d.index())).toList();
            if (shared.size() >= req.count()) {
                pool = shared;
            }
        }
        if (req.preferredNuma().isPresent()) {
            int numa = req.preferredNuma().getAsInt();
            List<DeviceState> local = pool.stream().filter(d -> required.contains(d.index())
                    || (v.topology().numaNode(d.index()).isPresent()
                            && v.topology().numaNode(d.index()).getAsInt() == numa))
                    .toList();
            if (local.size() >= req.count()) {
                pool = local;
            }
        }
        return pool;
    }

    /** {@link #key(Objective, SchedulingView, List, boolean)} with the affinity to the GPUs that stay free. */
    static long[] key(Objective o, SchedulingView v, List<Integer> set) {
        return key(o, v, set, true);
    }

    /**
     * The key of one set (see the class comment). {@code stayFree}: whether the SET tie-break reads the affinity to
     * the GPUs that stay free (the Javadoc's words) or to every GPU free before the allocation (the same order whenever
     * the set holds only free GPUs; they differ for a shared request whose set mixes GPUs already shared and free ones).
     */
    static long[] key(Objective o, SchedulingView v, List<Integer> set, boolean stayFree) {
        GpuTopology t = v.topology();
        List<Integer> free = new ArrayList<>();
        for (DeviceState d : v.devices()) {
            if (isFree(d)) {
                free.add(d.index());
            }
        }
        List<Integer> order = v.candidates().stream().map(DeviceState::index).toList();
        long score = 0;
        for (int a = 0; a < set.size(); a++) {
            for (int b = a + 1; b < set.size(); b++) {
                score += pair(t, set.get(a), set.get(b));
            }
        }
        long pos = 0;
        for (int i : set) {
            pos += order.indexOf(i);
        }
        List<Integer> stay = new ArrayList<>(free);
        stay.removeAll(set);
        if (o == Objective.SET && !stayFree) {
            long affinity = 0;
            for (int i : set) {
                for (int f : free) {
                    if (f != i) {
                        affinity += pair(t, i, f);
                    }
                }
            }
            return new long[]{score, -affinity, -pos};
        }
        if (o == Objective.SET) {
            long affinity = 0;
            for (int i : set) {
                for (int f : stay) {
                    affinity += pair(t, i, f);
                }
            }
            return new long[]{score, -affinity, -pos};
        }
        long left = 0;
        for (int a = 0; a < stay.size(); a++) {
            for (int b = a + 1; b < stay.size(); b++) {
                left += pair(t, stay.get(a), stay.get(b));
            }
        }
        return new long[]{score + left, score, -pos};
    }

    static int compare(long[] x, long[] y) {
        for (int i = 0; i < x.length; i++) {
            if (x[i] != y[i]) {
                return Long.compare(x[i], y[i]);
            }
        }
        return 0;
    }

    /** The best set and its key. */
    record Best(List<Integer> set, long[] key, long subsets) {
    }

    /**
     * Every k-subset of the documented pool holding the required devices, scored incrementally. The objective is the
     * request's: a shared request always uses SET.
     */
    static Best best(Objective strategyObjective, GpuRequest req, SchedulingView v) {
        return best(strategyObjective, req, v, true);
    }

    /** Like {@link #best(Objective, GpuRequest, SchedulingView)}; {@code stayFree}: see {@link #key}. */
    static Best best(Objective strategyObjective, GpuRequest req, SchedulingView v, boolean stayFree) {
        Objective o = req.sharing() == SharingMode.SHARED ? Objective.SET : strategyObjective;
        List<DeviceState> pool = pool(req, v);
        GpuTopology t = v.topology();
        int p = pool.size();
        int k = req.count();
        int[] id = new int[p];
        for (int i = 0; i < p; i++) {
            id[i] = pool.get(i).index();
        }
        List<Integer> order = v.candidates().stream().map(DeviceState::index).toList();
        List<Integer> free = new ArrayList<>();
        for (DeviceState d : v.devices()) {
            if (isFree(d)) {
                free.add(d.index());
            }
        }
        long freeTotal = 0;
        for (int a = 0; a < free.size(); a++) {
            for (int b = a + 1; b < free.size(); b++) {
                freeTotal += pair(t, free.get(a), free.get(b));
            }
        }
        long[][] s = new long[p][p];
        long[] deg = new long[p];
        boolean[] fr = new boolean[p];
        long[] pos = new long[p];
        boolean[] req0 = new boolean[p];
        Set<Integer> required = new HashSet<>(req.requiredDevices());
        for (int i = 0; i < p; i++) {
            for (int j = 0; j < p; j++) {
                s[i][j] = i == j ? 0 : pair(t, id[i], id[j]);
            }
            for (int f : free) {
                if (f != id[i]) {
                    deg[i] += pair(t, id[i], f);
                }
            }
            fr[i] = isFree(pool.get(i));
            pos[i] = order.indexOf(id[i]);
            req0[i] = required.contains(id[i]);
        }
        Enum e = new Enum(o, s, deg, fr, pos, req0, k, freeTotal, stayFree);
        e.run(0, 0, 0, 0, 0, 0, 0, 0);
        List<Integer> set = new ArrayList<>();
        for (int i : e.bestPick) {
            set.add(id[i]);
        }
        set.sort(null);
        return new Best(set, e.bestKey, e.leaves);
    }

    private static final class Enum {
        final Objective o;
        final long[][] s;
        /** s[i][y] times how many of i and y are free, and s[i][y] where both are (the inner loop without tests). */
        final long[][] sInner;
        final long[][] sFree;
        final long[] deg;
        final boolean[] fr;
        final long[] pos;
        final boolean[] req;
        final int k;
        final int p;
        final long freeTotal;
        final int[] pick;
        int[] bestPick;
        long[] bestKey;
        long leaves;
        final int[] reqAfter;
        final boolean stayFree;

        Enum(Objective o, long[][] s, long[] deg, boolean[] fr, long[] pos, boolean[] req, int k, long freeTotal,
                boolean stayFree) {
            this.stayFree = stayFree;
            this.o = o;
            this.s = s;
            this.deg = deg;
            this.fr = fr;
            this.pos = pos;
            this.req = req;
            this.k = k;
            this.p = s.length;
            sInner = new long[p][p];
            sFree = new long[p][p];
            for (int i = 0; i < p; i++) {
                for (int y = 0; y < p; y++) {
                    sInner[i][y] = s[i][y] * ((fr[i] ? 1 : 0) + (fr[y] ? 1 : 0));
                    sFree[i][y] = fr[i] && fr[y] ? s[i][y] : 0;
                }
            }
            this.freeTotal = freeTotal;
            pick = new int[k];
            reqAfter = new int[p + 1];
            for (int i = p - 1; i >= 0; i--) {
                reqAfter[i] = reqAfter[i + 1] + (req[i] ? 1 : 0);
            }
        }

        /**
         * @param i      next pool member to decide
         * @param n      members chosen so far
         * @param score  set score
         * @param inner  sum over the set's pairs of the pair score times how many of its two ends are free
         * @param sumDeg sum over the set of each member's score to every free device but itself
         * @param degFr  the same over the set's free members only
         * @param ff     sum over the set's pairs with both ends free
         * @param ps     sum of candidate positions
         */
        void run(int i, int n, long score, long inner, long sumDeg, long degFr, long ff, long ps) {
            if (n == k) {
                if (reqAfter[i] > 0) {
                    return;
                }
                leaves++;
                // the key's three parts, kept in an array only when it is the best so far (millions of leaves)
                long k0;
                long k1;
                long k2 = -ps;
                if (o == Objective.SET) {
                    k0 = score;
                    k1 = -(sumDeg - (stayFree ? inner : 0));
                } else {
                    long left = freeTotal - degFr + ff;
                    k0 = score + left;
                    k1 = score;
                }
                if (bestKey == null || k0 > bestKey[0] || (k0 == bestKey[0] && (k1 > bestKey[1]
                        || (k1 == bestKey[1] && k2 > bestKey[2])))) {
                    bestKey = new long[]{k0, k1, k2};
                    bestPick = pick.clone();
                }
                return;
            }
            if (p - i < k - n || reqAfter[i] > k - n) {
                return;
            }
            // take i
            long ds = 0;
            long di = 0;
            long dff = 0;
            long[] row = s[i];
            long[] rowInner = sInner[i];
            long[] rowFree = sFree[i];
            for (int x = 0; x < n; x++) {
                int y = pick[x];
                ds += row[y];
                di += rowInner[y];
                dff += rowFree[y];
            }
            pick[n] = i;
            run(i + 1, n + 1, score + ds, inner + di, sumDeg + deg[i], degFr + (fr[i] ? deg[i] : 0), ff + dff,
                    ps + pos[i]);
            if (!req[i]) {
                run(i + 1, n, score, inner, sumDeg, degFr, ff, ps);
            }
        }
    }

    // ------------------------------------------------------------------ building nodes and views

    static GpuDevice device(int index, int numa) {
        return GpuDevice.builder().index(index).uuid("GPU-adv-" + index).vendor(GpuVendor.NVIDIA).name("X")
                .memory(MemorySize.ofGibibytes(16)).pciBusId("b" + index).numaNode(numa).minor(index).build();
    }

    static DeviceState held(GpuDevice d) {
        return new DeviceState(d, GpuHealth.HEALTHY, Optional.of("held"), 0, MemorySize.ZERO, Optional.empty(),
                DeviceState.Pool.IN_POOL, Optional.empty(), Optional.empty());
    }

    static DeviceState shared(GpuDevice d) {
        return new DeviceState(d, GpuHealth.HEALTHY, Optional.empty(), 1, MemorySize.ofGibibytes(1), Optional.empty(),
                DeviceState.Pool.IN_POOL, Optional.empty(), Optional.empty());
    }

    static SchedulingView view(List<DeviceState> all, List<DeviceState> cands, GpuTopology topology) {
        List<DeviceState> a = List.copyOf(all);
        List<DeviceState> c = List.copyOf(cands);
        return new SchedulingView() {
            @Override
            public List<DeviceState> devices() {
                return a;
            }

            @Override
            public List<DeviceState> candidates() {
                return c;
            }

            @Override
            public DeviceState device(int index) {
                return a.stream().filter(d -> d.index() == index).findFirst()
                        .orElseThrow(() -> new IllegalArgumentException("no device " + index));
            }

            @Override
            public GpuTopology topology() {
                return topology;
            }

            @Override
            public Instant now() {
                return Instant.parse("2026-01-01T00:00:00Z");
            }
        };
    }

    /** @return why {@code got} is not a valid answer, or null: size, distinct, candidates only, required held */
    static String invalid(GpuRequest req, SchedulingView v, List<Integer> got) {
        if (got.size() != req.count()) {
            return "size " + got.size() + " != " + req.count() + ": " + got;
        }
        if (new HashSet<>(got).size() != got.size()) {
            return "duplicates: " + got;
        }
        Set<Integer> cands = new HashSet<>();
        v.candidates().forEach(d -> cands.add(d.index()));
        if (!cands.containsAll(got)) {
            return "not all candidates: " + got;
        }
        if (!got.containsAll(req.requiredDevices())) {
            return "required " + req.requiredDevices() + " missing from " + got;
        }
        return null;
    }

    /**
     * Search nodes the strategy's branch and bound visits for an exclusive request with no NUMA preference (pool =
     * candidates), through the strategy package's test entry {@link SearchProbe}, only to prove that a corpus reaches
     * the tighter bound (never to judge an answer).
     */
    static int searchNodes(Objective o, GpuRequest req, SchedulingView v) {
        return SearchProbe.branchAndBoundNodes(o, req, v);
    }

    /** Threads {@link #atOnce} runs tries on: the CI machine's 2 cores (a surefire fork runs one class at a time). */
    static final int THREADS = Math.max(2, Math.min(4, Runtime.getRuntime().availableProcessors()));

    /**
     * Runs independent tries of a corpus {@link #THREADS} at a time (each builds its own strategy; the brute force and
     * the probe share nothing) and returns their results in the tries' order. A try that fails rethrows its failure:
     * the first in order, so a corpus reports the same try it would one after another.
     */
    static <T> List<T> atOnce(List<Callable<T>> tries) {
        ExecutorService ex = Executors.newFixedThreadPool(THREADS);
        try {
            List<Future<T>> fs = new ArrayList<>();
            for (Callable<T> c : tries) {
                fs.add(ex.submit(c));
            }
            List<T> out = new ArrayList<>();
            for (Future<T> f : fs) {
                try {
                    out.add(f.get());
                } catch (ExecutionException e) {
                    if (e.getCause() instanceof Error err) {
                        throw err;
                    }
                    throw new IllegalStateException(e.getCause());
                }
            }
            return out;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while the tries ran", e);
        } finally {
            ex.shutdownNow();
        }
    }

    static String describe(GpuTopology t, SchedulingView v) {
        StringBuilder b = new StringBuilder();
        b.append("devices ");
        for (DeviceState d : v.devices()) {
            b.append(d.index()).append(isFree(d) ? "" : d.sharedHolders() > 0 ? "s" : "h")
                    .append(t.numaNode(d.index()).isPresent() ? "@" + t.numaNode(d.index()).getAsInt() : "")
                    .append(' ');
        }
        b.append("; candidates ").append(v.candidates().stream().map(DeviceState::index).toList());
        b.append("; pairs (links/pcie) ");
        for (GpuTopology.Link l : t.links()) {
            if (l.linkCount() > 0 || l.pcie() != PcieLevel.SYSTEM) {
                b.append(l.a()).append('-').append(l.b()).append(':').append(l.linkCount()).append('/')
                        .append(l.pcie()).append(' ');
            }
        }
        return b.toString();
    }

    static String str(long[] key) {
        return Arrays.toString(key);
    }

    /** @return a sorted copy (the strategy returns its set in pool order) */
    static List<Integer> sorted(List<Integer> set) {
        List<Integer> out = new ArrayList<>(set);
        out.sort(null);
        return out;
    }
}
