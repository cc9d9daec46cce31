package io.gpusched.core.sim;

import io.gpusched.core.DeviceIdentifiers;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuHealthListener;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.GpuProcess;
import io.gpusched.core.GpuSample;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.MemorySize;
import io.gpusched.core.PcieLevel;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * A node that exists only in memory: the devices and topology of a named profile or a YAML node description, with
 * metrics and health that tests and demos set by hand. Always available; no native code.
 * Obtain one from {@link io.gpusched.core.GpuInventories#simulated(String)} or {@link #builder(String)}.
 */
public final class SimulatedGpuInventory implements GpuInventory {

    private final String name;
    private final String description;
    private final List<GpuDevice> devices;
    private final GpuTopology topology;
    private final Clock clock;
    private final GpuMetrics[] metrics;
    private final GpuHealth[] health;
    private final List<GpuHealthListener> listeners = new CopyOnWriteArrayList<>();
    private volatile GpuSample sample;
    private final boolean tracksProcesses;
    private final Map<Integer, List<GpuProcess>> processes =
            new ConcurrentHashMap<>();

    private SimulatedGpuInventory(Builder b) {
        this.name = b.name;
        this.description = b.description;
        this.devices = List.copyOf(b.devices);
        GpuTopology.Builder t = GpuTopology.builder(devices);
        b.links.forEach(l -> t.links(l[0], l[1], l[2]));
        b.pcie.forEach(p -> t.pcie((Integer) p[0], (Integer) p[1], (PcieLevel) p[2]));
        this.topology = t.build();
        this.clock = b.clock;
        this.tracksProcesses = b.tracksProcesses;
        this.metrics = new GpuMetrics[devices.size()];
        this.health = new GpuHealth[devices.size()];
        for (int i = 0; i < devices.size(); i++) {
            metrics[i] = GpuMetrics.of(devices.get(i).index(), 0, MemorySize.ZERO, 32, 45, clock.instant());
            health[i] = GpuHealth.HEALTHY;
        }
        publish();
    }

    /** @return a builder for a node of this name */
    public static Builder builder(String name) {
        return new Builder(name);
    }

    @Override
    public String backend() {
        return "simulated:" + name;
    }

    /** @return the profile or node name */
    public String name() {
        return name;
    }

    /** @return a one-line description of the node */
    public String description() {
        return description;
    }

    @Override
    public List<GpuDevice> devices() {
        return devices;
    }

    @Override
    public GpuTopology topology() {
        return topology;
    }

    /** Returns the metrics last set; the same object until a setter changes them. */
    @Override
    public GpuSample sample() {
        return sample;
    }

    /** Lists the processes set with {@link #setProcesses}, when the node was built {@code tracksProcesses}. */
    @Override
    public Optional<List<GpuProcess>> processes(GpuDevice device) {
        position(device.index());
        return tracksProcesses ? Optional.of(processes.getOrDefault(device.index(), List.of()))
                : Optional.empty();
    }

    /** Sets the processes a device reports (for drain tests and demos). */
    public void setProcesses(int index, List<GpuProcess> list) {
        position(index);
        processes.put(index, List.copyOf(list));
    }

    @Override
    public GpuHealth health(GpuDevice device) {
        return health[position(device.index())];
    }

    /**
     * Sets the live values of one device; they appear in the next {@link #sample()}.
     *
     * @param index              device index
     * @param utilizationPercent 0..100
     * @param memoryUsed         memory in use, at most the device's total
     * @param temperatureCelsius temperature
     * @param powerWatts         power draw
     */
    public synchronized void setMetrics(int index, double utilizationPercent, MemorySize memoryUsed,
            double temperatureCelsius, double powerWatts) {
        int p = position(index);
        if (utilizationPercent < 0 || utilizationPercent > 100) {
            throw new IllegalArgumentException("utilization must be 0..100, was " + utilizationPercent);
        }
        if (!devices.get(p).memory().isAtLeast(memoryUsed)) {
            throw new IllegalArgumentException("GPU " + index + " has " + devices.get(p).memory()
                    + "; cannot use " + memoryUsed);
        }
        metrics[p] = GpuMetrics.of(index, utilizationPercent, memoryUsed, temperatureCelsius, powerWatts,
                clock.instant());
        publish();
    }

    /** Marks a device as reporting no metrics (as a device whose sensors fail). */
    public synchronized void clearMetrics(int index) {
        int p = position(index);
        metrics[p] = new GpuMetrics(index, OptionalDouble.empty(), Optional.empty(), OptionalDouble.empty(),
                OptionalDouble.empty(), clock.instant());
        publish();
    }

    /** Sets a device's health and tells the health listeners (as an XID watcher would). */
    public void setHealth(int index, GpuHealth h) {
        Objects.requireNonNull(h, "health");
        int p = position(index);
        synchronized (this) {
            if (health[p].equals(h)) {
                return;
            }
            health[p] = h;
        }
        for (GpuHealthListener l : listeners) {
            l.onHealthChange(devices.get(p), h);
        }
    }

    private void publish() {
        sample = new GpuSample(clock.instant(), List.of(metrics));
    }

    private int position(int index) {
        for (int i = 0; i < devices.size(); i++) {
            if (devices.get(i).index() == index) {
                return i;
            }
        }
        throw new IllegalArgumentException("GPU index " + index + " is not on simulated node " + name
                + " (" + devices.size() + " GPUs)");
    }

    @Override
    public void addHealthListener(GpuHealthListener listener) {
        listeners.add(Objects.requireNonNull(listener, "listener"));
    }

    @Override
    public void removeHealthListener(GpuHealthListener listener) {
        listeners.remove(listener);
    }

    /**
     * The environment variable naming a health file that {@link io.gpusched.core.GpuInventories#simulated} nodes
     * follow, so another process (a test driving a NodeManager) can lose and recover GPUs of a simulated node.
     */
    public static final String HEALTH_FILE_ENV = "GPUSCHED_SIMULATED_HEALTH";

    private volatile Thread healthFollower;

    /**
     * Follows a health file until {@link #close()}: every {@code every} the file is read if it changed; each line
     * {@code <index> <reason>} makes that GPU unhealthy with the reason, every GPU not named is healthy (a missing
     * file: all healthy). Lines that name no GPU of this node are ignored. Changes reach the health listeners.
     *
     * @param file  the file
     * @param every how often to look
     */
    public void followHealthFile(Path file, Duration every) {
        Objects.requireNonNull(file, "file");
        if (every.isNegative() || every.isZero()) {
            throw new IllegalArgumentException("health file poll interval must be positive: " + every);
        }
        Thread t = new Thread(() -> {
            Object seen = null;
            while (!Thread.currentThread().isInterrupted()) {
                Object now;
                try {
                    now = Files.exists(file) ? Files.getLastModifiedTime(file).toMillis() + "/" + Files.size(file)
                            + "/" + Files.readString(file).hashCode() : "absent";
                } catch (IOException e) {
                    now = "unreadable";
                }
                if (!now.equals(seen)) {
                    seen = now;
                    Map<Integer, String> sick = new HashMap<>();
                    try {
                        if (Files.exists(file)) {
                            for (String line : Files.readAllLines(file)) {
                                String[] f = line.strip().split("\\s+", 2);
                                if (f[0].matches("[0-9]{1,9}")) {
                                    sick.put(Integer.parseInt(f[0]), f.length > 1 ? f[1] : "lost (health file)");
                                }
                            }
                        }
                    } catch (IOException e) {
                        continue;
                    }
                    for (GpuDevice d : devices) {
                        String why = sick.get(d.index());
                        setHealth(d.index(), why == null ? GpuHealth.HEALTHY : GpuHealth.unhealthy(why));
                    }
                }
                try {
                    Thread.sleep(every.toMillis());
                } catch (InterruptedException e) {
                    return;
                }
            }
        }, "gpusched-simulated-health " + file);
        t.setDaemon(true);
        Thread old = healthFollower;
        healthFollower = t;
        if (old != null) {
            old.interrupt();
        }
        t.start();
    }

    @Override
    public void close() {
        Thread t = healthFollower;
        if (t != null) {
            t.interrupt();
        }
        listeners.clear();
    }

    @Override
    public String toString() {
        return backend() + " (" + devices.size() + " GPUs)";
    }

    /** Builds a simulated node device by device. */
    public static final class Builder {
        private final String name;
        private String description = "";
        private final List<GpuDevice> devices = new ArrayList<>();
        private final List<int[]> links = new ArrayList<>();
        private final List<Object[]> pcie = new ArrayList<>();
        private Clock clock = Clock.systemUTC();
        private boolean tracksProcesses;

        private Builder(String name) {
            if (name == null || name.isBlank()) {
                throw new IllegalArgumentException("a simulated node needs a name");
            }
            this.name = name;
        }

        /** @param v one-line description @return this */
        public Builder description(String v) {
            description = Objects.requireNonNull(v, "description");
            return this;
        }

        /**
         * @param d a device; indices and UUIDs must be unique, identifiers as {@link DeviceIdentifiers} accepts
         * @return this
         * @throws IllegalArgumentException naming a clash or an identifier that is not acceptable
         */
        public Builder device(GpuDevice d) {
            DeviceIdentifiers.check(d);
            for (GpuDevice e : devices) {
                if (e.index() == d.index() || e.uuid().equals(d.uuid())) {
                    throw new IllegalArgumentException("simulated node " + name + ": device " + d.index() + " ("
                            + d.uuid() + ") clashes with device " + e.index() + " (" + e.uuid() + ")");
                }
            }
            devices.add(d);
            return this;
        }

        /** @param a device index @param b device index @param count NVLink/XGMI links @return this */
        public Builder links(int a, int b, int count) {
            links.add(new int[]{a, b, count});
            return this;
        }

        /** @param a device index @param b device index @param level PCIe level between them @return this */
        public Builder pcie(int a, int b, PcieLevel level) {
            pcie.add(new Object[]{a, b, level});
            return this;
        }

        /** @param v clock for sample timestamps @return this */
        public Builder clock(Clock v) {
            clock = Objects.requireNonNull(v, "clock");
            return this;
        }

        /** @param v whether {@link #processes} lists processes (so released devices drain) @return this */
        public Builder tracksProcesses(boolean v) {
            tracksProcesses = v;
            return this;
        }

        /** @return the node @throws IllegalArgumentException if a link names a device not on the node */
        public SimulatedGpuInventory build() {
            if (devices.isEmpty()) {
                throw new IllegalArgumentException("simulated node " + name + " has no devices");
            }
            devices.sort((x, y) -> Integer.compare(x.index(), y.index()));
            return new SimulatedGpuInventory(this);
        }
    }
}
