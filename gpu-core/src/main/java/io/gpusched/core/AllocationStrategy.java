package io.gpusched.core;

import java.util.List;
import java.util.Objects;

/**
 * Chooses which devices serve a request. Pure and deterministic: it reads the {@link SchedulingView} and never calls
 * native code. Built-ins are in {@link AllocationStrategies}; a host writes its own by implementing this.
 */
public interface AllocationStrategy {

    /** @return a short name for configuration and logs */
    String name();

    /**
     * Picks {@code request.count()} distinct devices among {@link SchedulingView#candidates()}, including every one of
     * {@link GpuRequest#requiredDevices()} (decline if one is not a candidate).
     *
     * @return device indices, or an empty list to decline (the request fails with {@code NO_PLACEMENT});
     *         anything else is a strategy bug and is rejected by the scheduler
     */
    List<Integer> select(GpuRequest request, SchedulingView view);

    /**
     * Like {@link #select}, with what the strategy can prove about its choice. The scheduler calls this one; the
     * default rates nothing ({@link PlacementQuality#unrated()}).
     *
     * @return the devices (empty to decline) and their quality
     */
    default Choice choose(GpuRequest request, SchedulingView view) {
        return new Choice(select(request, view), PlacementQuality.unrated());
    }

    /**
     * A strategy's answer with its certificate.
     *
     * @param devices device indices, or empty to decline
     * @param quality proven optimal, within a bound, or not rated
     */
    record Choice(List<Integer> devices, PlacementQuality quality) {
        /** Checks for nulls (the list is read once by the scheduler, not copied here). */
        public Choice {
            Objects.requireNonNull(quality, "quality");
        }
    }
}
