package io.gpusched.core;

import java.time.Instant;
import java.util.List;

/**
 * What an {@link AllocationStrategy} sees for one request: an immutable snapshot of the node. The scheduler has
 * already applied the request's hard constraints (vendor, model, memory, capability, health, availability,
 * explicit ids), so {@link #candidates()} holds only devices the request may get.
 */
public interface SchedulingView {

    /** @return every device of the node, in index order */
    List<DeviceState> devices();

    /** @return the devices this request may be given, in index order */
    List<DeviceState> candidates();

    /** @return the state of one device @throws IllegalArgumentException for an index not on the node */
    DeviceState device(int index);

    /** @return the node's link matrix */
    GpuTopology topology();

    /** @return the scheduler clock's current time, for strategies that judge sample age */
    Instant now();
}
