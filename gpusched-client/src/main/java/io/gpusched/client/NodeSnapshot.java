package io.gpusched.client;

import io.gpusched.core.DeviceView;
import java.util.List;

/**
 * One frame of {@link NodeClient#watch}: the node's GPUs (with the allocations holding them and their latest metrics).
 *
 * @param devices the GPUs
 */
public record NodeSnapshot(List<DeviceView> devices) {

    /** Copies the list. */
    public NodeSnapshot {
        devices = List.copyOf(devices);
    }
}
