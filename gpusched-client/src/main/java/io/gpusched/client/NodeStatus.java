package io.gpusched.client;

import io.gpusched.core.AllocationView;
import io.gpusched.core.DeviceView;
import java.util.List;
import java.util.Objects;

/**
 * Who holds what on the node, at one moment: its facts, its GPUs and its live allocations.
 *
 * @param node        the node's facts
 * @param at          when the status was taken (ISO-8601)
 * @param devices     the GPUs
 * @param allocations the live allocations
 */
public record NodeStatus(NodeInfo node, String at, List<DeviceView> devices, List<AllocationView> allocations) {

    /** Copies the lists. */
    public NodeStatus {
        Objects.requireNonNull(node, "node");
        Objects.requireNonNull(at, "at");
        devices = List.copyOf(devices);
        allocations = List.copyOf(allocations);
    }
}
