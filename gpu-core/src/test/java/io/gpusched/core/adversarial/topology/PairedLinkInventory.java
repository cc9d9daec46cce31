package io.gpusched.core.adversarial.topology;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuHealthListener;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.GpuSample;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.PcieLevel;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * An inventory of n devices where pairs (0,1), (2,3), ... have 4 NVLinks and every other pair none (so the
 * topology strategy's best pair is predictable: (0,1) first by candidate order), health the test changes (listeners
 * called on the caller's thread).
 */
final class PairedLinkInventory implements GpuInventory {
    final List<GpuDevice> devices;
    private final GpuHealth[] health;
    private final List<GpuHealthListener> listeners = new CopyOnWriteArrayList<>();
    private final GpuTopology topology;
    /** Devices that report a running process (a released one then drains). */
    final java.util.Set<Integer> busy = java.util.concurrent.ConcurrentHashMap.newKeySet();
    /** Whether this inventory lists processes at all (else a release frees at once, as without NVML). */
    volatile boolean listsProcesses;

    PairedLinkInventory(int n) {
        List<GpuDevice> ds = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            ds.add(BruteForceOracle.device(i));
        }
        devices = List.copyOf(ds);
        health = new GpuHealth[n];
        Arrays.fill(health, GpuHealth.HEALTHY);
        GpuTopology.Builder b = GpuTopology.builder(devices);
        for (int i = 0; i < n; i++) {
            for (int j = i + 1; j < n; j++) {
                b.links(i, j, j == i + 1 && i % 2 == 0 ? 4 : 0).pcie(i, j, PcieLevel.SYSTEM);
            }
        }
        topology = b.build();
    }

    void change(int index, GpuHealth h) {
        synchronized (health) {
            health[index] = h;
        }
        for (GpuHealthListener l : listeners) {
            l.onHealthChange(devices.get(index), h);
        }
    }

    @Override
    public String backend() {
        return "review23";
    }

    @Override
    public List<GpuDevice> devices() {
        return devices;
    }

    @Override
    public GpuTopology topology() {
        return topology;
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
    public java.util.Optional<List<io.gpusched.core.GpuProcess>> processes(GpuDevice device) {
        if (!listsProcesses) {
            return java.util.Optional.empty();
        }
        return java.util.Optional.of(busy.contains(device.index())
                ? List.of(new io.gpusched.core.GpuProcess(4242, java.util.Optional.empty())) : List.of());
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
