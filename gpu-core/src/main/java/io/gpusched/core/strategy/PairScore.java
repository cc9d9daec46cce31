package io.gpusched.core.strategy;

import io.gpusched.core.GpuTopology;
import io.gpusched.core.PcieLevel;
import java.util.List;

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

    /** @return the score of a set: the sum of {@link #exact} over its pairs */
    public static long ofSet(GpuTopology topology, List<Integer> set) {
        long s = 0;
        for (int a = 0; a < set.size(); a++) {
            for (int b = a + 1; b < set.size(); b++) {
                s += exact(topology, set.get(a), set.get(b));
            }
        }
        return s;
    }

    /**
     * @return the score of two distinct devices in a topology, as an int
     * @throws ArithmeticException when it does not fit an int (more than 21,474,835 links): use {@link #exact}
     */
    public static int of(GpuTopology topology, int a, int b) {
        return Math.toIntExact(exact(topology, a, b));
    }

    /** @return the score of two distinct devices in a topology; any link count the topology accepts fits */
    public static long exact(GpuTopology topology, int a, int b) {
        return 100L * topology.linkCount(a, b) + pcie(topology.pcieLevel(a, b));
    }
}
