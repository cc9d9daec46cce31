package io.gpusched.benchmarks;

import io.gpusched.core.AllocationStrategies;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.strategy.PairScore;
import java.time.Duration;
import java.util.List;

/**
 * Prints the topology strategy's score against the best known on the 64-partition pool, where it is heuristic:
 * the best known is the exact optimum, found by enumerating how many partitions each GPU gives.
 * {@code java -cp benchmarks/target/benchmarks.jar io.gpusched.benchmarks.HeuristicQuality}
 */
public final class HeuristicQuality {
    private HeuristicQuality() {
    }

    public static void main(String[] args) {
        GpuInventory inv = Nodes.partitions64();
        GpuTopology t = inv.topology();
        for (int k : new int[] {2, 3, 4, 8, 16}) {
            GpuScheduler s = GpuScheduler.builder().inventory(inv).strategy(AllocationStrategies.topologyAware())
                    .auditLogging(false).maintenanceInterval(Duration.ZERO).build();
            List<Integer> got = s.allocate(GpuRequest.builder().count(k).build()).deviceIndices();
            long score = score(t, got);
            long best = bestKnown(t, k);
            System.out.printf("k=%d heuristic=%d best-known=%d ratio=%.3f%n", k, score, best, (double) score / best);
        }
    }

    static long score(GpuTopology t, List<Integer> set) {
        return PairScore.ofSet(t, set);
    }

    /**
     * The exact optimum: partitions of one GPU are interchangeable, so every choice is a count per GPU; enumerate all
     * count vectors (at most C(k+7, 7) of them) and score each from one representative partition per GPU.
     */
    static long bestKnown(GpuTopology t, int k) {
        int gpus = t.size() / 8;
        long[][] cross = new long[gpus][gpus];
        for (int g = 0; g < gpus; g++) {
            for (int h = 0; h < gpus; h++) {
                cross[g][h] = g == h ? PairScore.of(t, g * 8, g * 8 + 1) : PairScore.of(t, g * 8, h * 8);
            }
        }
        return best(cross, new int[gpus], 0, k);
    }

    private static long best(long[][] cross, int[] count, int g, int left) {
        if (g == count.length) {
            if (left != 0) {
                return -1;
            }
            long s = 0;
            for (int a = 0; a < count.length; a++) {
                s += cross[a][a] * count[a] * (count[a] - 1) / 2;
                for (int b = a + 1; b < count.length; b++) {
                    s += cross[a][b] * count[a] * count[b];
                }
            }
            return s;
        }
        long best = -1;
        for (int c = 0; c <= Math.min(8, left); c++) {
            count[g] = c;
            best = Math.max(best, best(cross, count, g + 1, left - c));
        }
        count[g] = 0;
        return best;
    }
}
