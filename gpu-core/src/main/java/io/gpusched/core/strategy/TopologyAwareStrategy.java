package io.gpusched.core.strategy;

import io.gpusched.core.AllocationStrategy;
import io.gpusched.core.DeviceState;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.PlacementQuality;
import io.gpusched.core.SchedulingView;
import io.gpusched.core.SharingMode;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Picks GPUs by their links ({@link PairScore}: NVLink/XGMI links, then PCIe proximity), for one of two named
 * {@link Objective objectives}:
 * <ul>
 *   <li>{@link Objective#SET} ({@value #NAME}): the set that talks best, the largest sum of pair scores over its pairs;
 *       among equals, the one with the least affinity (sum of pair scores) to the GPUs that stay free, that is free
 *       GPUs not in the set (a 1-GPU request takes a GPU whose partners are busy rather than break an intact
 *       pair);</li>
 *   <li>{@link Objective#REMAINING} ({@value #REMAINING_NAME}): what is left for the next job: the largest sum of the
 *       set's own pair scores and those left among the free GPUs (equivalently, the set that cuts the least link score
 *       to what stays free); among equals, the set's own score. This is go-gpuallocator's best-effort objective
 *       whenever the remaining GPUs form one group (at most {@code 2 x count} free GPUs); see docs/PERFORMANCE.md.</li>
 * </ul>
 * The last tie-break, for both, is candidate order (the smallest sum of positions in {@link
 * SchedulingView#candidates()}, also when a NUMA preference or a shared request narrows the pool searched). Required
 * devices ({@link GpuRequest#requiredDevices()}) are always in the answer and the rest is chosen by the same objective,
 * so it is best connected to them. Explicit device ids are returned as asked; a NUMA preference restricts the search to
 * that node when it can hold the request; shared requests prefer GPUs already shared and always use the {@link
 * Objective#SET} objective (a shared GPU stays usable by others).
 *
 * <p>Every key is kept in its own {@code long} (no folding), and a request whose sums could leave a long (pair scores
 * of billions times thousands of GPUs) is refused with {@code INVALID_REQUEST} rather than answered wrongly.
 *
 * <p><b>Search and budget.</b> Twins (devices with the same score to every other device, {@link TopologyScores}) are
 * interchangeable, so the search chooses how many devices each class of twins gives. Where the classes fall into few
 * blocks (classes with one score to every other class, such as the packages of one NUMA node) a knapsack per block and
 * every split over the blocks is exact and fast. Elsewhere: a greedy start, improved by swaps (local search), then a
 * branch and bound bounded by the best possible gain of the devices still to add. Every search spends its work
 * budget ({@link #DEFAULT_WORK_BUDGET} units by default, deterministic, set-up included: about one unit per table entry
 * or class looked at; set-up that no answer can skip is spent even where it alone passes the budget; see
 * docs/PERFORMANCE.md for what that costs in time); a search that ends early returns the best set found with an upper
 * bound on the optimum (the smaller of the unexplored branches' and a root bound with Lagrangian splits of the pair
 * weights), and {@link #choose} says so ({@link PlacementQuality}). The budget {@link #EXACT} searches to the end
 * (offline use).
 *
 * <p>The search itself is {@link PlacementSearch} (package-private), on the scores {@link TopologyScores} keeps per
 * topology.
 */
public final class TopologyAwareStrategy implements AllocationStrategy {

    /** Configuration name of the {@link Objective#SET} objective. */
    public static final String NAME = "topology";
    /** Configuration name of the {@link Objective#REMAINING} objective. */
    public static final String REMAINING_NAME = "topology-remaining";
    /**
     * Default work budget of one search (set-up included). Measured here (docs/PERFORMANCE.md, issue 23): the
     * slowest call's thread CPU time is about 3-6 ms on irregular 64 to 1,024-device nodes (set-up that no answer skips
     * can take a 1,024-device search past this budget); mean quality against the proven optimum is the same as at
     * 2,000,000 on the benchmark's corpus (it falls at 500,000), and the search stays exact on every test corpus. The
     * slowest call in wall time on the loaded 2-core machine is still above the 10 ms goal (preemption).
     */
    public static final long DEFAULT_WORK_BUDGET = 1_000_000;
    /** The work budget that means none: the search runs until its answer is proven optimal. */
    public static final long EXACT = Long.MAX_VALUE;
    /** Smallest work budget accepted. */
    public static final long MIN_WORK_BUDGET = 1_000;
    /** What a work budget may be, in words (for error messages). */
    public static final String WORK_BUDGET_VALUES = "a whole number of work units >= 1000 (default 1000000; about 2 to"
            + " 3 ns each on a loaded 2-core machine), or \"exact\" for no budget";
    /** Most splits of a request over blocks of classes enumerated by the block search. */
    static final int BLOCK_COMPOSITIONS = 20_000;
    /**
     * Search nodes after which the branch and bound builds its tighter bound (each device's best r - 1 partners rather
     * than r - 1 times its best one): a table of classes x classes x count, worth building only once the search has
     * shown it is not trivial.
     */
    static final int TIGHT_BOUND_AFTER = 2_048;
    /** Largest table (entries) the tighter bound may build; larger searches keep the plain bound. */
    static final int TIGHT_BOUND_ENTRIES = 1 << 21;
    /** Work units the root bound's Lagrangian steps may spend when the budget is {@link #EXACT}. */
    static final long LAGRANGE_EXACT_UNITS = 4_000_000;

    /** What the topology strategy maximizes. */
    public enum Objective {
        /** The set's own connectivity: the sum of pair scores over its pairs; ties by least affinity to what stays. */
        SET,
        /** What is left for the next job: set score plus the score left among the free GPUs; ties by set score. */
        REMAINING
    }

    private final Objective objective;
    private final long workBudget;
    private volatile TopologyScores[] scores = new TopologyScores[0];
    /** The per-call tables of the last search, kept for the next ({@link SearchScratch}). */
    private final AtomicReference<SearchScratch> spare = new AtomicReference<>();
    /** Topologies whose scores a strategy keeps. */
    static final int TOPOLOGIES_KEPT = 8;

    /** The {@link Objective#SET} objective, {@link #DEFAULT_WORK_BUDGET}. */
    public TopologyAwareStrategy() {
        this(Objective.SET);
    }

    /** @param objective what to maximize ({@link #DEFAULT_WORK_BUDGET}) */
    public TopologyAwareStrategy(Objective objective) {
        this(objective, DEFAULT_WORK_BUDGET);
    }

    /**
     * @param objective  what to maximize
     * @param workBudget work units one search may spend (at least 1,000), or {@link #EXACT} for no budget
     * @throws IllegalArgumentException for a budget below 1,000 units
     */
    public TopologyAwareStrategy(Objective objective, long workBudget) {
        this.objective = Objects.requireNonNull(objective, "objective");
        if (workBudget < MIN_WORK_BUDGET) {
            throw new IllegalArgumentException("work budget " + workBudget + " is too small: give at least 1,000 units"
                    + " (default " + DEFAULT_WORK_BUDGET + ", or TopologyAwareStrategy.EXACT for no budget)");
        }
        this.workBudget = workBudget;
    }

    /**
     * Reads a work budget as written in configuration ({@code gpu.placement.work_budget}).
     *
     * @param text {@code exact} (any case) or a whole number of work units of at least 1,000
     * @return the budget ({@link #EXACT} for {@code exact})
     * @throws IllegalArgumentException naming the text and {@link #WORK_BUDGET_VALUES what is valid}
     */
    public static long parseWorkBudget(String text) {
        String t = text == null ? "" : text.strip();
        if (t.equalsIgnoreCase("exact")) {
            return EXACT;
        }
        long v;
        try {
            if (!t.matches("-?[0-9]+")) { // Long.parseLong takes any script's digits; the sibling keys take ASCII only
                throw new NumberFormatException(t);
            }
            v = Long.parseLong(t);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("\"" + t.replace("\0", "\\0") + "\" is not a work budget; valid: "
                    + WORK_BUDGET_VALUES);
        }
        if (v < MIN_WORK_BUDGET) {
            throw new IllegalArgumentException(v + " is too small; valid: " + WORK_BUDGET_VALUES);
        }
        return v;
    }

    /** @return the objective */
    public Objective objective() {
        return objective;
    }

    /** @return the work budget of one search ({@link #EXACT}: none) */
    public long workBudget() {
        return workBudget;
    }

    @Override
    public String name() {
        return objective == Objective.SET ? NAME : REMAINING_NAME;
    }

    @Override
    public List<Integer> select(GpuRequest request, SchedulingView view) {
        return choose(request, view).devices();
    }

    @Override
    public Choice choose(GpuRequest request, SchedulingView view) {
        List<DeviceState> cands = view.candidates();
        int k = request.count();
        if (cands.size() < k) {
            return new Choice(List.of(), PlacementQuality.unrated());
        }
        if (request.isExplicit()) {
            return new Choice(cands.stream().map(DeviceState::index).toList(), PlacementQuality.optimal());
        }
        List<Integer> required = request.requiredDevices();
        for (int r : required) {
            if (cands.stream().noneMatch(d -> d.index() == r)) {
                return new Choice(List.of(), PlacementQuality.unrated());
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
        TopologyScores ts = scores(view.topology());
        Objective o = request.sharing() == SharingMode.SHARED ? Objective.SET : objective;
        SearchScratch scratch = SearchScratch.take(spare);
        PlacementSearch s = new PlacementSearch(ts, pool, candidatePositions(ts, cands, pool), required,
                view.devices(), k, o, workBudget, TIGHT_BOUND_AFTER, true, scratch);
        List<Integer> got = s.run();
        PlacementQuality q = got.isEmpty() ? PlacementQuality.unrated() : s.quality();
        SearchScratch.give(spare, scratch);
        return new Choice(got, q);
    }

    /** @return for each pool member, its position in the candidate list (the documented last tie-break) */
    private static int[] candidatePositions(TopologyScores ts, List<DeviceState> cands, List<DeviceState> pool) {
        int[] byTopo = new int[ts.indices.length];
        Arrays.fill(byTopo, -1);
        for (int i = 0; i < cands.size(); i++) {
            int p = ts.position(cands.get(i).index());
            if (p >= 0 && byTopo[p] < 0) {
                byTopo[p] = i;
            }
        }
        int[] out = new int[pool.size()];
        for (int i = 0; i < out.length; i++) {
            int p = ts.position(pool.get(i).index());
            out[i] = p >= 0 ? byTopo[p] : i;
        }
        return out;
    }

    /**
     * The scores of a topology, kept for the last {@link #TOPOLOGIES_KEPT} topologies (one strategy may serve several
     * nodes, such as a console or a benchmark; a node's topology is read once, so a snapshot keeps its instance).
     */
    private TopologyScores scores(GpuTopology topology) {
        TopologyScores[] kept = scores;
        for (TopologyScores s : kept) {
            if (s.topology == topology) {
                return s;
            }
        }
        TopologyScores s = new TopologyScores(topology);
        TopologyScores[] next = new TopologyScores[Math.min(TOPOLOGIES_KEPT, kept.length + 1)];
        next[0] = s;
        System.arraycopy(kept, 0, next, 1, next.length - 1);
        scores = next;
        return s;
    }
}
