package io.gpusched.nvml;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.GpuSample;
import io.gpusched.core.GpuTopology;
import java.time.Clock;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Supplier;

/** An inventory whose devices are read once and whose samples come from a supplier (or carry no values). */
final class StaticNvidiaInventory implements GpuInventory {
    private final String backend;
    private final List<GpuDevice> devices;
    private final GpuTopology topology;
    private final Supplier<GpuSample> sampler;

    StaticNvidiaInventory(String backend, List<GpuDevice> devices, Supplier<GpuSample> sampler) {
        this.backend = backend;
        this.devices = List.copyOf(devices);
        this.topology = GpuTopology.unconnected(this.devices);
        this.sampler = sampler;
    }

    /** @return a sampler reporting every value absent: the source has no live metrics */
    static Supplier<GpuSample> noMetrics(List<GpuDevice> devices, Clock clock) {
        return () -> {
            Instant now = clock.instant();
            List<GpuMetrics> m = new ArrayList<>(devices.size());
            for (GpuDevice d : devices) {
                m.add(GpuMetrics.unavailable(d.index(), now));
            }
            return new GpuSample(now, m);
        };
    }

    @Override
    public String backend() {
        return backend;
    }

    @Override
    public List<GpuDevice> devices() {
        return devices;
    }

    /** No link information from this source: PCIe level by NUMA node, no NVLink. */
    @Override
    public GpuTopology topology() {
        return topology;
    }

    @Override
    public GpuSample sample() {
        return sampler.get();
    }

    @Override
    public void close() {
    }

    @Override
    public String toString() {
        return backend + " (" + devices.size() + " devices)";
    }
}
