package io.gpusched.core.adversarial.scheduler;

import io.gpusched.core.ComputeCapability;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuHealthListener;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.GpuProcess;
import io.gpusched.core.GpuSample;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Function;

/**
 * A hand-made inventory for the hot-path attacks: devices given by the test, health the test changes (listeners are
 * called on the caller's thread, so "changed, then allocate" is a happens-before), processes the test answers.
 */
final class Node implements GpuInventory {
    final List<GpuDevice> devices;
    private final GpuHealth[] health;
    final List<GpuHealthListener> listeners = new CopyOnWriteArrayList<>();
    volatile Function<GpuDevice, Optional<List<GpuProcess>>> processes = d -> Optional.empty();

    Node(List<GpuDevice> devices) {
        this.devices = List.copyOf(devices);
        this.health = new GpuHealth[devices.size()];
        java.util.Arrays.fill(health, GpuHealth.HEALTHY);
    }

    /** n identical NVIDIA devices "NVIDIA A100-SXM4-80GB" with 80 GiB, cc 8.0. */
    static Node uniform(int n) {
        List<GpuDevice> ds = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            ds.add(device(i, "NVIDIA A100-SXM4-80GB", GpuVendor.NVIDIA, MemorySize.ofGibibytes(80),
                    new ComputeCapability(8, 0)));
        }
        return new Node(ds);
    }

    static GpuDevice device(int index, String name, GpuVendor vendor, MemorySize memory, ComputeCapability cc) {
        GpuDevice.Builder b = GpuDevice.builder().index(index).uuid("GPU-hp-" + index).vendor(vendor).name(name)
                .pciBusId(String.format("0000:%02x:00.0", index + 1));
        if (memory == null) {
            b.memoryUnknown();
        } else {
            b.memory(memory);
        }
        if (cc != null) {
            b.computeCapability(cc);
        }
        return b.build();
    }

    /** Sets the health, then tells every listener on this thread (as a backend watcher would). */
    void change(int position, GpuHealth h) {
        synchronized (health) {
            health[position] = h;
        }
        for (GpuHealthListener l : listeners) {
            l.onHealthChange(devices.get(position), h);
        }
    }

    /** Sets the health the backend reports without telling anyone (the state at open). */
    void setQuietly(int position, GpuHealth h) {
        synchronized (health) {
            health[position] = h;
        }
    }

    @Override
    public String backend() {
        return "hotpath-node";
    }

    @Override
    public List<GpuDevice> devices() {
        return devices;
    }

    @Override
    public GpuTopology topology() {
        return GpuTopology.unconnected(devices);
    }

    @Override
    public GpuSample sample() {
        Instant now = Instant.now();
        return new GpuSample(now, devices.stream().map(d -> GpuMetrics.unavailable(d.index(), now)).toList());
    }

    @Override
    public GpuHealth health(GpuDevice device) {
        synchronized (health) {
            return health[devices.indexOf(device)];
        }
    }

    @Override
    public Optional<List<GpuProcess>> processes(GpuDevice device) {
        return processes.apply(device);
    }

    @Override
    public void addHealthListener(GpuHealthListener listener) {
        listeners.add(listener);
    }

    @Override
    public void removeHealthListener(GpuHealthListener listener) {
        listeners.remove(listener);
    }

    @Override
    public void close() {
    }
}
