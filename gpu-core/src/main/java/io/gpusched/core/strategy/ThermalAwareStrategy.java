package io.gpusched.core.strategy;

import io.gpusched.core.AllocationStrategy;
import io.gpusched.core.DeviceState;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.SchedulingView;
import io.gpusched.core.WorkloadHint;
import java.time.Duration;
import java.time.Instant;
import java.util.Comparator;
import java.util.List;
import java.util.Objects;

/**
 * Coolest and least utilized first, as a tie-break of another strategy: it re-ranks the view's candidates and hands
 * the view to its base (by default topology-aware), whose last tie-break is candidate order. Temperatures are compared
 * in {@value #TEMP_BAND}-degree bands and utilization in {@value #UTIL_BAND}-point bands, so two equal GPUs do not
 * flip on noise. Samples older than the configured age are ignored (those devices rank after fresh ones). A request
 * hint picks the policy: TRAINING (and no hint) spreads to the least utilized, then coolest; INFERENCE packs onto
 * GPUs already shared, then coolest.
 */
public final class ThermalAwareStrategy implements AllocationStrategy {

    /** Configuration name. */
    public static final String NAME = "thermal";
    /** Temperature band in °C. */
    public static final int TEMP_BAND = 5;
    /** Utilization band in percentage points. */
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
        Instant oldest = view.now().minus(maxAge);
        Comparator<DeviceState> heat = Comparator.comparingInt((DeviceState d) -> fresh(d, oldest) ? 0 : 1);
        Comparator<DeviceState> temp = Comparator.comparingInt(d -> band(d, oldest, true));
        Comparator<DeviceState> util = Comparator.comparingInt(d -> band(d, oldest, false));
        Comparator<DeviceState> order = request.hint().orElse(WorkloadHint.TRAINING) == WorkloadHint.INFERENCE
                ? Comparator.comparing((DeviceState d) -> !d.isShared()).thenComparing(heat).thenComparing(temp)
                        .thenComparing(util)
                : heat.thenComparing(util).thenComparing(temp);
        return base.select(request, SchedulingView.reordered(view, order));
    }

    private static boolean fresh(DeviceState d, Instant oldest) {
        return d.metrics().map(m -> !m.sampledAt().isBefore(oldest)).orElse(false);
    }

    private static int band(DeviceState d, Instant oldest, boolean temperature) {
        if (!fresh(d, oldest)) {
            return Integer.MAX_VALUE;
        }
        GpuMetrics m = d.metrics().get();
        if (temperature) {
            return m.temperatureCelsius().isPresent() ? (int) Math.floor(m.temperatureCelsius().getAsDouble() / TEMP_BAND)
                    : Integer.MAX_VALUE;
        }
        return m.utilizationPercent().isPresent() ? (int) Math.floor(m.utilizationPercent().getAsDouble() / UTIL_BAND)
                : Integer.MAX_VALUE;
    }
}
