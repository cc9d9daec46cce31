package io.gpusched.benchmarks;

import io.gpusched.core.AllocationStrategy;
import io.gpusched.core.DeviceState;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.SchedulingView;
import io.gpusched.core.strategy.PairScore;
import java.util.ArrayList;
import java.util.List;

/**
 * The baseline: go-gpuallocator's method. Every partition of the free GPUs into sets of k (2,027,025 partitions for
 * n = 16, k = 2) is scored by the sum of its sets' pair scores; the best partition wins and its best set is returned.
 * Only for n divisible by k, as that method assumes.
 */
final class ExhaustivePartitionStrategy implements AllocationStrategy {
    long partitionsVisited;

    @Override
    public String name() {
        return "exhaustive-partition";
    }

    @Override
    public List<Integer> select(GpuRequest request, SchedulingView view) {
        List<DeviceState> c = view.candidates();
        int k = request.count();
        int n = c.size();
        if (n < k || n % k != 0) {
            return List.of();
        }
        int[] idx = c.stream().mapToInt(DeviceState::index).toArray();
        GpuTopology t = view.topology();
        int[][] s = new int[n][n];
        for (int a = 0; a < n; a++) {
            for (int b = 0; b < n; b++) {
                s[a][b] = a == b ? 0 : PairScore.of(t, idx[a], idx[b]);
            }
        }
        Search search = new Search(n, k, s);
        search.run(new boolean[n], new ArrayList<>(), 0);
        partitionsVisited = search.visited;
        List<Integer> out = new ArrayList<>();
        for (int p : search.bestSet) {
            out.add(idx[p]);
        }
        return out;
    }

    private static final class Search {
        final int n;
        final int k;
        final int[][] s;
        long bestTotal = -1;
        int[] bestSet;
        long visited;

        Search(int n, int k, int[][] s) {
            this.n = n;
            this.k = k;
            this.s = s;
        }

        void run(boolean[] used, List<int[]> sets, long total) {
            int first = -1;
            for (int i = 0; i < n; i++) {
                if (!used[i]) {
                    first = i;
                    break;
                }
            }
            if (first < 0) {
                visited++;
                if (total > bestTotal) {
                    bestTotal = total;
                    int[] best = null;
                    long bs = -1;
                    for (int[] set : sets) {
                        long v = score(set);
                        if (v > bs) {
                            bs = v;
                            best = set;
                        }
                    }
                    bestSet = best.clone();
                }
                return;
            }
            used[first] = true;
            int[] set = new int[k];
            set[0] = first;
            extend(used, sets, total, set, 1, first + 1);
            used[first] = false;
        }

        private void extend(boolean[] used, List<int[]> sets, long total, int[] set, int size, int from) {
            if (size == k) {
                sets.add(set.clone());
                run(used, sets, total + score(set));
                sets.remove(sets.size() - 1);
                return;
            }
            for (int i = from; i < n; i++) {
                if (!used[i]) {
                    used[i] = true;
                    set[size] = i;
                    extend(used, sets, total, set, size + 1, i + 1);
                    used[i] = false;
                }
            }
        }

        private long score(int[] set) {
            long v = 0;
            for (int a = 0; a < set.length; a++) {
                for (int b = a + 1; b < set.length; b++) {
                    v += s[set[a]][set[b]];
                }
            }
            return v;
        }
    }
}
