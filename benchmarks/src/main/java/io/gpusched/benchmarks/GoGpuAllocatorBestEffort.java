package io.gpusched.benchmarks;

import io.gpusched.core.GpuTopology;
import io.gpusched.core.strategy.PairScore;
import java.util.ArrayList;
import java.util.List;

/**
 * The baseline for GetPreferredAllocation: go-gpuallocator's best-effort policy (v0.6, what NVIDIA's device plug-in
 * calls), re-implemented from its documented behaviour. The available GPUs, padded with empty slots to a multiple of
 * {@code size}, are split in every way into sets of {@code size}; among the partitions with a set holding every
 * required GPU, the one with the largest summed set score wins, and its best set holding the required GPUs is the
 * answer. Pair scores are gpusched's {@link PairScore} (the same table: 100 per NVLink plus the PCIe term). Unlike the
 * original, a set with a padding slot is never returned (the original can return it: go-gpuallocator PR #80), and the
 * link table is built once, not from NVML on every call as NVIDIA's plug-in does (so this baseline is faster than the
 * real one).
 */
final class GoGpuAllocatorBestEffort {
    private final int[][] score;
    long partitionsVisited;

    /** @param topology the node (indices 0..n-1) */
    GoGpuAllocatorBestEffort(GpuTopology topology) {
        int n = topology.size();
        score = new int[n][n];
        List<Integer> idx = topology.deviceIndices();
        for (int a = 0; a < n; a++) {
            for (int b = 0; b < n; b++) {
                score[a][b] = a == b ? 0 : PairScore.of(topology, idx.get(a), idx.get(b));
            }
        }
    }

    /** @return the chosen positions, or empty where go-gpuallocator answers nothing */
    List<Integer> allocate(List<Integer> available, List<Integer> required, int size) {
        if (size <= 0 || available.size() < size || required.size() > size || !available.containsAll(required)) {
            return List.of();
        }
        int padded = (available.size() + size - 1) / size * size;
        int[] items = new int[padded];
        for (int i = 0; i < padded; i++) {
            items[i] = i < available.size() ? available.get(i) : -1;
        }
        Search s = new Search(items, size, required);
        s.run(new boolean[padded], new ArrayList<>(), 0);
        partitionsVisited = s.visited;
        List<Integer> out = new ArrayList<>();
        if (s.bestSet != null) {
            for (int d : s.bestSet) {
                out.add(d);
            }
        }
        return out;
    }

    private final class Search {
        final int[] items;
        final int k;
        final List<Integer> required;
        long best = Long.MIN_VALUE;
        int[] bestSet;
        long visited;

        Search(int[] items, int k, List<Integer> required) {
            this.items = items;
            this.k = k;
            this.required = required;
        }

        void run(boolean[] used, List<int[]> sets, long total) {
            int first = -1;
            for (int i = 0; i < items.length; i++) {
                if (!used[i]) {
                    first = i;
                    break;
                }
            }
            if (first < 0) {
                visited++;
                if (total > best) {
                    int[] chosen = null;
                    long chosenScore = Long.MIN_VALUE;
                    for (int[] set : sets) {
                        if (holdsRequired(set) && !padded(set) && setScore(set) > chosenScore) {
                            chosen = set;
                            chosenScore = setScore(set);
                        }
                    }
                    if (chosen != null) {
                        best = total;
                        bestSet = chosen.clone();
                    }
                }
                return;
            }
            used[first] = true;
            int[] set = new int[k];
            set[0] = items[first];
            extend(used, sets, total, set, 1, first + 1);
            used[first] = false;
        }

        private void extend(boolean[] used, List<int[]> sets, long total, int[] set, int size, int from) {
            if (size == k) {
                sets.add(set.clone());
                run(used, sets, total + setScore(set));
                sets.remove(sets.size() - 1);
                return;
            }
            for (int i = from; i < items.length; i++) {
                if (!used[i]) {
                    used[i] = true;
                    set[size] = items[i];
                    extend(used, sets, total, set, size + 1, i + 1);
                    used[i] = false;
                }
            }
        }

        private boolean holdsRequired(int[] set) {
            for (int r : required) {
                boolean in = false;
                for (int d : set) {
                    in |= d == r;
                }
                if (!in) {
                    return false;
                }
            }
            return true;
        }

        private boolean padded(int[] set) {
            for (int d : set) {
                if (d < 0) {
                    return true;
                }
            }
            return false;
        }

        private long setScore(int[] set) {
            long v = 0;
            for (int a = 0; a < set.length; a++) {
                for (int b = a + 1; b < set.length; b++) {
                    if (set[a] >= 0 && set[b] >= 0) {
                        v += score[set[a]][set[b]];
                    }
                }
            }
            return v;
        }
    }
}
