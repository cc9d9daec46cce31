package io.gpusched.core.strategy;

import io.gpusched.core.AllocationStrategy;
import io.gpusched.core.DeviceState;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.SchedulingView;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Least loaded first: fewest shared holders, then lowest utilization of the latest sample, then lowest share of
 * memory in use, then the NUMA group with the most idle devices, then candidate order (index order unless a
 * composing strategy reordered the view). Spreads jobs over GPUs and sockets. Required devices
 * ({@link GpuRequest#requiredDevices()}) come first; the others are ranked as above.
 */
public final class SpreadingStrategy implements AllocationStrategy {

    /** Configuration name. */
    public static final String NAME = "spreading";

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public List<Integer> select(GpuRequest request, SchedulingView view) {
        List<DeviceState> candidates = view.candidates();
        if (candidates.size() < request.count()) {
            return List.of();
        }
        List<Integer> required = request.requiredDevices();
        for (int r : required) {
            if (candidates.stream().noneMatch(d -> d.index() == r)) {
                return List.of();
            }
        }
        Map<Integer, Integer> idlePerGroup = new HashMap<>();
        for (DeviceState d : view.devices()) {
            if (d.isIdle()) {
                idlePerGroup.merge(group(view, d), 1, Integer::sum);
            }
        }
        List<Integer> out = new ArrayList<>(required);
        candidates.stream().filter(d -> !required.contains(d.index()))
                .sorted(Comparator.comparingInt(DeviceState::sharedHolders)
                        .thenComparingDouble(DeviceState::utilization)
                        .thenComparingDouble(SpreadingStrategy::memoryUsedShare)
                        .thenComparing((DeviceState d) -> -idlePerGroup.getOrDefault(group(view, d), 0)))
                .limit(request.count() - required.size()).forEach(d -> out.add(d.index()));
        return out;
    }

    private static int group(SchedulingView view, DeviceState d) {
        return view.topology().numaNode(d.index()).orElse(-1);
    }

    private static double memoryUsedShare(DeviceState d) {
        long total = d.device().memory().bytes();
        long used = d.metrics().flatMap(m -> m.memoryUsed()).map(m -> m.bytes()).orElse(0L);
        long reserved = d.sharedReserved().bytes();
        return total == 0 ? 0 : (double) Math.max(used, reserved) / total;
    }
}
