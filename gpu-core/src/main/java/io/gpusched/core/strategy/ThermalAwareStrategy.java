package io.gpusched.core.strategy;

import io.gpusched.core.AllocationStrategy;
import io.gpusched.core.DeviceState;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.SchedulingView;
import io.gpusched.core.WorkloadHint;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.OptionalDouble;

/**
 * Coolest and least utilized first, as a tie-break of another strategy: it re-ranks the view's candidates and hands
 * the view to its base (by default topology-aware), whose last tie-break is candidate order. Readings are compared with
 * a tolerance, so two equal GPUs do not flip on noise: temperature orders two GPUs only when they differ by more than
 * {@value #TEMP_BAND} °C, utilization only when it differs by more than {@value #UTIL_BAND} points. The candidates are
 * sorted by the reading and a new rank starts wherever the gap to the previous one exceeds the tolerance, so readings
 * that chain within it (41, 44, 47 °C) share one rank and 44 vs 45 °C never decides anything. This is a tolerance, not
 * hysteresis over time: the strategy keeps no state between requests. Samples older than the configured age are
 * ignored (those devices rank after fresh ones). A request hint picks the policy: TRAINING (and no hint) spreads to
 * the least utilized, then coolest; INFERENCE packs onto GPUs already shared, then coolest.
 */
public final class ThermalAwareStrategy implements AllocationStrategy {

    /** Configuration name. */
    public static final String NAME = "thermal";
    /** Temperature tolerance in °C: smaller differences do not rank GPUs. */
    public static final int TEMP_BAND = 5;
    /** Utilization tolerance in percentage points: smaller differences do not rank GPUs. */
    public static final int UTIL_BAND = 10;

    private final AllocationStrategy base;
    private final Duration maxAge;

    /**
     * @param base   the strategy whose ties this one breaks
     * @param maxAge samples older than this are ignored
     */
    public ThermalAwareStrategy(AllocationStrategy base, Duration maxAge) {
        this.base = Objects.requireNonNull(base, "base");
        this.maxAge = Objects.requireNonNull(maxAge, "maxAge");
    }

    @Override
    public String name() {
        return NAME + "(" + base.name() + ")";
    }

    @Override
    public List<Integer> select(GpuRequest request, SchedulingView view) {
        return choose(request, view).devices();
    }

    /**
     * The base's choice on the re-ranked view, with the base's certificate passed through: the thermal ranks only
     * reorder the candidates (the base's last tie-break), so "proven optimal" and "within X %" keep their meaning for
     * the base's objective.
     */
    @Override
    public Choice choose(GpuRequest request, SchedulingView view) {
        Instant oldest = view.now().minus(maxAge);
        Map<Integer, Integer> tempRank = ranks(view.candidates(), oldest, true);
        Map<Integer, Integer> utilRank = ranks(view.candidates(), oldest, false);
        Comparator<DeviceState> heat = Comparator.comparingInt((DeviceState d) -> fresh(d, oldest) ? 0 : 1);
        Comparator<DeviceState> temp =
                Comparator.comparingInt(d -> tempRank.getOrDefault(d.index(), Integer.MAX_VALUE));
        Comparator<DeviceState> util =
                Comparator.comparingInt(d -> utilRank.getOrDefault(d.index(), Integer.MAX_VALUE));
        Comparator<DeviceState> order = request.hint().orElse(WorkloadHint.TRAINING) == WorkloadHint.INFERENCE
                ? Comparator.comparing((DeviceState d) -> !d.isShared()).thenComparing(heat).thenComparing(temp)
                        .thenComparing(util)
                : heat.thenComparing(util).thenComparing(temp);
        return base.choose(request, SchedulingView.reordered(view, order));
    }

    private static boolean fresh(DeviceState d, Instant oldest) {
        return d.metrics().map(m -> !m.sampledAt().isBefore(oldest)).orElse(false);
    }

    /**
     * @return rank of each fresh candidate with a reading: sorted by the reading, a new rank wherever the gap to the
     *         previous reading exceeds the tolerance (devices without a fresh reading are absent: they rank last)
     */
    static Map<Integer, Integer> ranks(List<DeviceState> candidates, Instant oldest, boolean temperature) {
        List<double[]> readings = new ArrayList<>();
        for (DeviceState d : candidates) {
            if (!fresh(d, oldest)) {
                continue;
            }
            GpuMetrics m = d.metrics().get();
            OptionalDouble v = temperature ? m.temperatureCelsius() : m.utilizationPercent();
            if (v.isPresent()) {
                readings.add(new double[]{v.getAsDouble(), d.index()});
            }
        }
        readings.sort(Comparator.comparingDouble(r -> r[0]));
        double tolerance = temperature ? TEMP_BAND : UTIL_BAND;
        Map<Integer, Integer> rank = new HashMap<>();
        int r = 0;
        for (int i = 0; i < readings.size(); i++) {
            if (i > 0 && readings.get(i)[0] - readings.get(i - 1)[0] > tolerance) {
                r++;
            }
            rank.put((int) readings.get(i)[1], r);
        }
        return rank;
    }
}
