package io.gpusched.nvml;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.GpuSample;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.ProcessUsageSample;
import java.time.Clock;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.function.Function;
import java.util.function.Supplier;

/**
 * An inventory whose devices are read once and whose samples come from a supplier (or carry no values), as do its
 * per-process samples (or none: the source cannot list processes).
 */
final class StaticNvidiaInventory implements GpuInventory {
    private final String backend;
    private final List<GpuDevice> devices;
    private final GpuTopology topology;
    private final Supplier<GpuSample> sampler;
    private final Function<GpuDevice, Optional<ProcessUsageSample>> processes;

    StaticNvidiaInventory(String backend, List<GpuDevice> devices, Supplier<GpuSample> sampler) {
        this(backend, devices, sampler, d -> Optional.empty());
    }

    StaticNvidiaInventory(String backend, List<GpuDevice> devices, Supplier<GpuSample> sampler,
            Function<GpuDevice, Optional<ProcessUsageSample>> processes) {
        this.backend = backend;
        this.devices = List.copyOf(devices);
        this.topology = GpuTopology.unconnected(this.devices);
        this.sampler = sampler;
        this.processes = processes;
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
    public Optional<ProcessUsageSample> processUsage(GpuDevice device) {
        if (devices.stream().noneMatch(d -> d.uuid().equals(device.uuid()))) {
            throw new IllegalArgumentException("device " + device.uuid() + " is not in this " + backend + " inventory");
        }
        return processes.apply(device);
    }

    @Override
    public void close() {
    }

    @Override
    public String toString() {
        return backend + " (" + devices.size() + " devices)";
    }
}
