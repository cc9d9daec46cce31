package io.gpusched.core.strategy;

import io.gpusched.core.AllocationStrategy;
import io.gpusched.core.DeviceState;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.PcieLevel;
import io.gpusched.core.SchedulingView;
import io.gpusched.core.SharingMode;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * Packs work tightly so large free blocks stay intact. Required devices ({@link GpuRequest#requiredDevices()}) are
 * always in the answer and the others are grown from them. Shared requests go to GPUs that are already shared, the
 * fullest that still fits first. Exclusive requests go to the NUMA group with the fewest candidates that can hold
 * them all (best fit); inside it, the seed is the GPU with the fewest idle close partners (so an intact NVLink pair
 * or PCIe switch stays whole), and the set grows greedily by closeness to what was chosen.
 */
public final class PackingStrategy implements AllocationStrategy {

    /** Configuration name. */
    public static final String NAME = "packing";

    /** Pair score at or above which two GPUs count as close partners (a link, or one PCIe switch). */
    static final int CLOSE = PairScore.pcie(PcieLevel.SINGLE);

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public List<Integer> select(GpuRequest request, SchedulingView view) {
        List<DeviceState> candidates = view.candidates();
        int n = request.count();
        if (candidates.size() < n) {
            return List.of();
        }
        List<Integer> required = request.requiredDevices();
        for (int r : required) {
            if (candidates.stream().noneMatch(d -> d.index() == r)) {
                return List.of();
            }
        }
        if (request.sharing() == SharingMode.SHARED) {
            List<Integer> out = new ArrayList<>(required);
            candidates.stream().filter(d -> !required.contains(d.index()))
                    .sorted(Comparator.comparing((DeviceState d) -> !d.isShared())
                            .thenComparing(DeviceState::reservableMemory))
                    .limit(n - required.size()).forEach(d -> out.add(d.index()));
            return out;
        }
        List<DeviceState> pool = bestFitGroup(candidates, view.topology(), n, required);
        return greedyCluster(pool, view, n, required);
    }

    /** The smallest NUMA group that holds n candidates including every required device; else all candidates. */
    private static List<DeviceState> bestFitGroup(List<DeviceState> candidates, GpuTopology topology, int n,
            List<Integer> required) {
        Map<Integer, List<DeviceState>> groups = new TreeMap<>();
        for (DeviceState d : candidates) {
            groups.computeIfAbsent(topology.numaNode(d.index()).orElse(-1), k -> new ArrayList<>()).add(d);
        }
        List<DeviceState> best = null;
        for (List<DeviceState> g : groups.values()) {
            boolean holdsRequired = required.stream().allMatch(r -> g.stream().anyMatch(d -> d.index() == r));
            if (holdsRequired && g.size() >= n && (best == null || g.size() < best.size())) {
                best = g;
            }
        }
        return best != null ? best : candidates;
    }

    /**
     * Start from the required devices (or, without any, seed on the least "free" device), then add the device closest
     * to the chosen set until n are chosen.
     */
    static List<Integer> greedyCluster(List<DeviceState> pool, SchedulingView view, int n, List<Integer> required) {
        GpuTopology topo = view.topology();
        int size = pool.size();
        int[] idx = new int[size];
        int[] freedom = new int[size];
        for (int i = 0; i < size; i++) {
            idx[i] = pool.get(i).index();
        }
        for (int i = 0; i < size; i++) {
            int f = 0;
            for (DeviceState other : view.devices()) {
                if (other.index() != idx[i] && other.isIdle() && other.health().isHealthy()
                        && PairScore.exact(topo, idx[i], other.index()) >= CLOSE) {
                    f++;
                }
            }
            freedom[i] = f;
        }
        boolean[] taken = new boolean[size];
        long[] affinity = new long[size];
        List<Integer> chosen = new ArrayList<>(n);
        for (int round = 0; round < n; round++) {
            int pick = -1;
            if (round < required.size()) {
                for (int i = 0; i < size; i++) {
                    if (idx[i] == required.get(round)) {
                        pick = i;
                    }
                }
            }
            for (int i = 0; i < size; i++) {
                if (taken[i] || round < required.size()) {
                    continue;
                }
                if (pick < 0 || affinity[i] > affinity[pick]
                        || (affinity[i] == affinity[pick] && freedom[i] < freedom[pick])) {
                    pick = i;
                }
            }
            taken[pick] = true;
            chosen.add(idx[pick]);
            for (int i = 0; i < size; i++) {
                if (!taken[i]) {
                    affinity[i] += PairScore.exact(topo, idx[pick], idx[i]);
                }
            }
        }
        return chosen;
    }
}
