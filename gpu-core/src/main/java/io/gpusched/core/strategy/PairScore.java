package io.gpusched.core.strategy;

import io.gpusched.core.GpuTopology;
import io.gpusched.core.PcieLevel;

/**
 * How well two GPUs talk to each other: 100 per NVLink/XGMI link plus a PCIe term (same board 60, one switch 50,
 * several switches 40, host bridge 30, same NUMA node 20, across sockets 10). Higher is closer.
 */
public final class PairScore {

    private PairScore() {
    }

    /** @return the PCIe term of the score for a level */
    public static int pcie(PcieLevel level) {
        return switch (level) {
            case INTERNAL -> 60;
            case SINGLE -> 50;
            case MULTIPLE -> 40;
            case HOSTBRIDGE -> 30;
            case NODE -> 20;
            case SYSTEM -> 10;
        };
    }

    /** Matrix of the last topology asked for, indexed by device index: computed once per inventory, not per request. */
    private record Cached(GpuTopology topology, int[][] scores) {
    }

    private static volatile Cached cached;

    /**
     * @return pair scores of a topology indexed by device index ({@code [a][b]}, 0 on the diagonal), computed once and
     *         reused while the same topology instance is asked for
     */
    public static int[][] matrix(GpuTopology topology) {
        Cached c = cached;
        if (c != null && c.topology() == topology) {
            return c.scores();
        }
        int max = topology.deviceIndices().stream().mapToInt(Integer::intValue).max().orElse(-1);
        int[][] m = new int[max + 1][max + 1];
        for (int a : topology.deviceIndices()) {
            for (int b : topology.deviceIndices()) {
                m[a][b] = a == b ? 0 : of(topology, a, b);
            }
        }
        cached = new Cached(topology, m);
        return m;
    }

    /** @return the score of a set: the sum of {@link #of} over its pairs */
    public static long ofSet(GpuTopology topology, java.util.List<Integer> set) {
        long s = 0;
        for (int a = 0; a < set.size(); a++) {
            for (int b = a + 1; b < set.size(); b++) {
                s += of(topology, set.get(a), set.get(b));
            }
        }
        return s;
    }

    /** @return the score of two distinct devices in a topology */
    public static int of(GpuTopology topology, int a, int b) {
        return 100 * topology.linkCount(a, b) + pcie(topology.pcieLevel(a, b));
    }
}
