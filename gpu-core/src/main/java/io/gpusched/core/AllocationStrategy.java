package io.gpusched.core;

import java.util.List;

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
}
