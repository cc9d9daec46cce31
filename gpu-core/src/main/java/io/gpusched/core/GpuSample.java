package io.gpusched.core;

import java.time.Instant;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * One sweep of {@link GpuInventory#sample()}: the metrics of every device, in device order.
 *
 * @param takenAt when the sweep started
 * @param metrics one entry per device
 */
public record GpuSample(Instant takenAt, List<GpuMetrics> metrics) {

    /** Copies the list. */
    public GpuSample {
        Objects.requireNonNull(takenAt, "takenAt");
        metrics = List.copyOf(metrics);
    }

    /** @return the metrics of the device with this index, if it was sampled */
    public Optional<GpuMetrics> forDevice(int index) {
        for (GpuMetrics m : metrics) {
            if (m.index() == index) {
                return Optional.of(m);
            }
        }
        return Optional.empty();
    }
}
