package io.gpusched.benchmarks;

import io.gpusched.core.AllocationStrategy;
import io.gpusched.core.DeviceState;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.SchedulingView;
import io.gpusched.core.strategy.PairScore;
import io.gpusched.core.strategy.TopologyAwareStrategy.Objective;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * Exact baselines for the topology strategy's two objectives, written without its search: they score candidate sets
 * with the objective's key (below) and keep the best, either over every k-subset ({@link #subsets}) or, on partitioned
 * pools, over every count per parent GPU ({@link #perParent}: partitions of one parent are twins, checked at each call,
 * so only how many each parent gives matters). Slow on purpose; used as the like-for-like baseline and as the judge of
 * the strategy's answers.
 */
final class ExactBaselines {
    private ExactBaselines() {
    }

    /**
     * The objective's key, larger is better, compared lexicographically. SET: (set score, -affinity of the set to the
     * free devices, -sum of candidate positions); REMAINING: (set score + score left among the free devices, set score,
     * -sum of candidate positions). Free: idle and allocatable devices of the view.
     */
    static long[] key(Objective o, SchedulingView view, List<Integer> set) {
        return key(o, view.topology(), order(view), free(view), set);
    }

    static List<Integer> order(SchedulingView view) {
        return view.candidates().stream().map(DeviceState::index).toList();
    }

    static List<Integer> free(SchedulingView view) {
        return view.devices().stream().filter(d -> d.isIdle() && d.isAllocatable()).map(DeviceState::index).toList();
    }

    static long[] key(Objective o, GpuTopology t, List<Integer> order, List<Integer> free, List<Integer> set) {
        long score = PairScore.ofSet(t, set);
        long pos = 0;
        for (int i : set) {
            pos += order.indexOf(i);
        }
        if (o == Objective.SET) {
            long damage = 0;
            for (int i : set) {
                for (int f : free) {
                    damage += f == i ? 0 : PairScore.of(t, i, f);
                }
            }
            return new long[]{score, -damage, -pos};
        }
        List<Integer> rest = new ArrayList<>(free);
        rest.removeAll(set);
        return new long[]{score + PairScore.ofSet(t, rest), score, -pos};
    }

    static int compare(long[] x, long[] y) {
        for (int i = 0; i < x.length; i++) {
            if (x[i] != y[i]) {
                return Long.compare(x[i], y[i]);
            }
        }
        return 0;
    }

    /** @return every k-subset of the candidates holding the required devices, best key wins */
    static AllocationStrategy subsets(Objective o) {
        return new AllocationStrategy() {
            @Override
            public String name() {
                return "exact-subsets-" + o.name().toLowerCase();
            }

            @Override
            public List<Integer> select(GpuRequest request, SchedulingView view) {
                List<Integer> req = request.requiredDevices();
                List<Integer> others = view.candidates().stream().map(DeviceState::index)
                        .filter(i -> !req.contains(i)).toList();
                Best best = new Best(o, view);
                combos(others, request.count() - req.size(), 0, new ArrayList<>(req), req.size(), best);
                return best.set == null ? List.of() : best.set;
            }
        };
    }

    private static void combos(List<Integer> from, int k, int start, List<Integer> cur, int base, Best best) {
        if (cur.size() - base == k) {
            best.offer(cur);
            return;
        }
        for (int i = start; i <= from.size() - (k - (cur.size() - base)); i++) {
            cur.add(from.get(i));
            combos(from, k, i + 1, cur, base, best);
            cur.remove(cur.size() - 1);
        }
    }

    /** @return every count per parent GPU (required first, then the earliest candidates), best key wins */
    static AllocationStrategy perParent(Objective o) {
        return new AllocationStrategy() {
            @Override
            public String name() {
                return "exact-per-parent-" + o.name().toLowerCase();
            }

            @Override
            public List<Integer> select(GpuRequest request, SchedulingView view) {
                GpuTopology t = view.topology();
                Map<String, List<Integer>> byParent = new TreeMap<>();
                List<Integer> req = request.requiredDevices();
                for (int r : req) {
                    byParent.computeIfAbsent(view.device(r).device().parentUuid().orElseThrow(), p -> new ArrayList<>())
                            .add(r);
                }
                for (DeviceState d : view.candidates()) {
                    if (!req.contains(d.index())) {
                        byParent.computeIfAbsent(d.device().parentUuid().orElseThrow(), p -> new ArrayList<>())
                                .add(d.index());
                    }
                }
                List<Integer> all = view.devices().stream().map(DeviceState::index).toList();
                for (List<Integer> g : byParent.values()) {
                    for (int a : g) {
                        for (int b : g) {
                            for (int z : all) {
                                if (a != b && z != a && z != b && PairScore.of(t, a, z) != PairScore.of(t, b, z)) {
                                    throw new IllegalStateException("partitions " + a + " and " + b
                                            + " of one parent are not interchangeable");
                                }
                            }
                        }
                    }
                }
                List<List<Integer>> groups = new ArrayList<>(byParent.values());
                int[] lo = new int[groups.size()];
                for (int g = 0; g < groups.size(); g++) {
                    for (int r : req) {
                        lo[g] += groups.get(g).contains(r) ? 1 : 0;
                    }
                }
                Best best = new Best(o, view);
                counts(groups, lo, new int[groups.size()], 0, request.count(), best);
                return best.set == null ? List.of() : best.set;
            }
        };
    }

    private static void counts(List<List<Integer>> groups, int[] lo, int[] m, int g, int left, Best best) {
        if (g == m.length) {
            if (left == 0) {
                List<Integer> set = new ArrayList<>();
                for (int i = 0; i < m.length; i++) {
                    set.addAll(groups.get(i).subList(0, m[i]));
                }
                best.offer(set);
            }
            return;
        }
        for (int c = lo[g]; c <= Math.min(left, groups.get(g).size()); c++) {
            m[g] = c;
            counts(groups, lo, m, g + 1, left - c, best);
        }
        m[g] = 0;
    }

    private static final class Best {
        final Objective o;
        final GpuTopology t;
        final List<Integer> order;
        final List<Integer> free;
        long[] key;
        List<Integer> set;

        Best(Objective o, SchedulingView view) {
            this.o = o;
            this.t = view.topology();
            this.order = order(view);
            this.free = free(view);
        }

        void offer(List<Integer> s) {
            long[] k = key(o, t, order, free, s);
            if (key == null || compare(k, key) > 0) {
                key = k;
                set = List.copyOf(s);
            }
        }
    }
}
