package io.gpusched.core;

import java.time.Instant;
import java.util.Comparator;
import java.util.List;

/**
 * What an {@link AllocationStrategy} sees for one request: an immutable snapshot of the node. The scheduler has
 * already applied the request's hard constraints (vendor, model, memory, capability, health, availability,
 * explicit ids), so {@link #candidates()} holds only devices the request may get.
 */
public interface SchedulingView {

    /** @return every device of the node, in index order */
    List<DeviceState> devices();

    /**
     * @return the devices this request may be given, in preference order: node order, except for a request that names
     *         its devices (indices or UUIDs), whose candidates come in the order it named them, and a composing
     * strategy
     *         may reorder them; built-in strategies break their last ties by this order
     */
    List<DeviceState> candidates();

    /** @return the state of one device @throws IllegalArgumentException for an index not on the node */
    DeviceState device(int index);

    /** @return the node's link matrix */
    GpuTopology topology();

    /** @return the scheduler clock's current time, for strategies that judge sample age */
    Instant now();

    /**
     * @return this view with its candidates sorted by {@code order} (stable: equal candidates keep their order); how a
     *         strategy hands its preference to another as a tie-break
     */
    static SchedulingView reordered(SchedulingView view, Comparator<DeviceState> order) {
        List<DeviceState> sorted = view.candidates().stream().sorted(order).toList();
        return new SchedulingView() {
            @Override
            public List<DeviceState> devices() {
                return view.devices();
            }

            @Override
            public List<DeviceState> candidates() {
                return sorted;
            }

            @Override
            public DeviceState device(int index) {
                return view.device(index);
            }

            @Override
            public GpuTopology topology() {
                return view.topology();
            }

            @Override
            public Instant now() {
                return view.now();
            }
        };
    }
}
