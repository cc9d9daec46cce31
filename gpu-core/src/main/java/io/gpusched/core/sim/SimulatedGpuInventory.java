package io.gpusched.core.sim;

import io.gpusched.core.DeviceIdentifiers;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuHealthListener;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.GpuProcess;
import io.gpusched.core.GpuProcessUsage;
import io.gpusched.core.GpuSample;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.MemorySize;
import io.gpusched.core.PcieLevel;
import io.gpusched.core.ProcessUsageSample;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * A node that exists only in memory: the devices and topology of a named profile or a YAML node description, with
 * metrics and health that tests and demos set by hand. Always available; no native code.
 *
 * <p>Scripted usage: a device may run a {@link UsageTrace} (its own utilization, memory and power over time, from
 * {@link #setTrace} or a node description's {@code usage:}) and processes with traces of their own
 * ({@link #setProcessTraces}, a description's {@code processes:}); {@link #processUsage} then reports each process's
 * exact mean utilization since the previous call for that device, and a device without a trace of its own shows the
 * sum of its processes'. A device with an energy counter ({@link Builder#energyCounter}) reports the exact integral of
 * its power since this inventory was opened (as a driver's counter counts since the driver loaded), in millijoules.
 * A MIG partition (a device with a parent) reports no utilization, per device or per process, as NVML does not.
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
    /** by position: the device's own trace, or null */
    private final UsageTrace[] traces;
    /** by position: pid -> trace of the processes scripted on the device */
    private final List<Map<Integer, UsageTrace>> processTraces = new ArrayList<>();
    private final boolean[] energyCounter;
    /** by position: millijoules counted up to {@link #energyAt} (epoch nanoseconds) */
    private final double[] energyMillijoules;
    private final long[] energyAt;
    private final Instant[] lastProcessCall;
    /** whether any device runs a trace or counts energy: then {@link #sample()} reads the clock on every call */
    private boolean live;

    /** Why a MIG partition has no utilization, per device or per process. */
    public static final String MIG_UTILIZATION_REASON = "MIG: NVML reports no utilization per MIG device or per"
            + " process on one (simulated as NVML behaves)";

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
        this.traces = new UsageTrace[devices.size()];
        this.energyCounter = new boolean[devices.size()];
        this.energyMillijoules = new double[devices.size()];
        this.energyAt = new long[devices.size()];
        this.lastProcessCall = new Instant[devices.size()];
        long opened = UsageTrace.nanos(clock.instant());
        for (int i = 0; i < devices.size(); i++) {
            metrics[i] = GpuMetrics.of(devices.get(i).index(), 0, MemorySize.ZERO, 32, 45, clock.instant());
            health[i] = GpuHealth.HEALTHY;
            processTraces.add(new TreeMap<>());
            energyAt[i] = opened;
            Integer index = devices.get(i).index();
            energyCounter[i] = b.energyCounters.getOrDefault(index, b.energyCounterDefault);
            live |= energyCounter[i];
            UsageTrace own = b.traces.get(index);
            if (own != null) {
                checkMemory(i, own);
                traces[i] = own;
                live = true;
            }
            Map<Integer, UsageTrace> pt = b.processTraces.get(index);
            if (pt != null && !pt.isEmpty()) {
                int at = i;
                pt.values().forEach(x -> checkMemory(at, x));
                processTraces.get(i).putAll(pt);
                live = true;
            }
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

    /**
     * Returns the metrics last set, the same object until a setter changes them, on a node without traces or energy
     * counters; otherwise the values at the clock's time, read anew on each call.
     */
    @Override
    public GpuSample sample() {
        synchronized (this) {
            if (!live) {
                return sample;
            }
            Instant now = clock.instant();
            long n = UsageTrace.nanos(now);
            List<GpuMetrics> out = new ArrayList<>(devices.size());
            for (int p = 0; p < devices.size(); p++) {
                out.add(liveMetrics(p, now, n));
            }
            return new GpuSample(now, out);
        }
    }

    /** @return device p's values at {@code now} (traces, energy counter), the set values where it runs none */
    private GpuMetrics liveMetrics(int p, Instant now, long nanos) {
        GpuMetrics set = metrics[p];
        GpuMetrics m = set;
        UsageTrace own = traces[p];
        Map<Integer, UsageTrace> procs = processTraces.get(p);
        if (own != null || !procs.isEmpty()) {
            double util = own != null ? own.utilizationAt(now) : Math.min(100, procs.values().stream()
                    .mapToDouble(t -> t.utilizationAt(now)).sum());
            long mem = own != null ? own.memoryAt(now).bytes() : procs.values().stream()
                    .mapToLong(t -> t.memoryAt(now).bytes()).sum();
            long cap = devices.get(p).memory().bytes();
            double watts = own != null ? own.powerAt(now) : UsageTrace.derivedPower(util);
            m = new GpuMetrics(set.index(), OptionalDouble.of(util), Optional.of(MemorySize.ofBytes(
                    Math.min(mem, cap))), OptionalDouble.of(30 + util * 0.5), OptionalDouble.of(watts), now);
        } else {
            m = new GpuMetrics(set.index(), set.utilizationPercent(), set.memoryUsed(), set.temperatureCelsius(),
                    set.powerWatts(), now);
        }
        if (devices.get(p).parentUuid().isPresent()) {
            m = new GpuMetrics(m.index(), OptionalDouble.empty(), m.memoryUsed(), m.temperatureCelsius(),
                    m.powerWatts(), now);
        }
        if (energyCounter[p]) {
            advanceEnergy(p, nanos);
            m = m.withEnergyMillijoules((long) Math.floor(energyMillijoules[p]));
        }
        return m;
    }

    /** Integrates device p's power up to {@code to} (epoch ns), step by step: exact for piecewise-constant power. */
    private void advanceEnergy(int p, long to) {
        long cur = energyAt[p];
        while (cur < to) {
            long next = Math.min(to, nextBreak(p, cur));
            energyMillijoules[p] += powerDuring(p, cur) * (next - cur) / 1e6; // W x ns = nJ
            cur = next;
        }
        energyAt[p] = Math.max(energyAt[p], to);
    }

    /** @return the first step boundary of any of device p's traces after {@code nanos} */
    private long nextBreak(int p, long nanos) {
        long next = Long.MAX_VALUE;
        if (traces[p] != null) {
            next = Math.min(next, (traces[p].slot(nanos) + 1) * traces[p].stepNanos());
        } else {
            for (UsageTrace t : processTraces.get(p).values()) {
                next = Math.min(next, (t.slot(nanos) + 1) * t.stepNanos());
            }
        }
        return next;
    }

    /** @return device p's power during the step that contains {@code nanos} */
    private double powerDuring(int p, long nanos) {
        if (traces[p] != null) {
            return traces[p].powerOfSlot(traces[p].slot(nanos));
        }
        Map<Integer, UsageTrace> procs = processTraces.get(p);
        if (!procs.isEmpty()) {
            double util = 0;
            for (UsageTrace t : procs.values()) {
                util += UsageTrace.at(t.utilization(), t.slot(nanos));
            }
            return UsageTrace.derivedPower(Math.min(100, util));
        }
        return metrics[p].powerWatts().orElse(0);
    }

    /**
     * Reports the processes scripted on the device ({@link #setProcessTraces}): each one's exact mean utilization
     * since the previous call for this device (the step before now on the first call) and its memory now; and, on a
     * node built {@code tracksProcesses}, the processes set with {@link #setProcesses} (memory only). Empty when the
     * device has neither, as a backend that cannot list processes. On a MIG partition utilization is not measured,
     * as with NVML.
     */
    @Override
    public Optional<ProcessUsageSample> processUsage(GpuDevice device) {
        int p = position(device.index());
        synchronized (this) {
            Map<Integer, UsageTrace> procs = processTraces.get(p);
            if (procs.isEmpty() && !tracksProcesses) {
                return Optional.empty();
            }
            Instant now = clock.instant();
            Instant last = lastProcessCall[p];
            lastProcessCall[p] = now;
            boolean mig = devices.get(p).parentUuid().isPresent();
            List<GpuProcessUsage> out = new ArrayList<>();
            procs.forEach((pid, t) -> out.add(new GpuProcessUsage(pid, mig ? OptionalDouble.empty()
                    : OptionalDouble.of(last == null || !last.isBefore(now) ? t.utilizationAt(now)
                            : t.meanUtilization(last, now)),
                    t.memory().isEmpty() ? Optional.empty() : Optional.of(t.memoryAt(now)))));
            for (GpuProcess g : processes.getOrDefault(device.index(), List.of())) {
                if (!procs.containsKey(g.pid())) {
                    out.add(new GpuProcessUsage(g.pid(), OptionalDouble.empty(), g.usedMemory()));
                }
            }
            return Optional.of(new ProcessUsageSample(now, out, mig ? Optional.of(MIG_UTILIZATION_REASON)
                    : Optional.empty(), Optional.empty()));
        }
    }

    /**
     * Runs a trace on a device from now on (its utilization, memory and power); {@code null} stops it, and
     * {@link #setMetrics} stops it too.
     *
     * @throws IllegalArgumentException when the trace uses more memory than the device has
     */
    public synchronized void setTrace(int index, UsageTrace trace) {
        int p = position(index);
        if (trace != null) {
            checkMemory(p, trace);
        }
        advanceEnergy(p, UsageTrace.nanos(clock.instant()));
        traces[p] = trace;
        live |= trace != null;
    }

    /**
     * Scripts the processes running on a device, pid to trace (utilization and memory; power is the device's),
     * replacing those scripted before; an empty map stops them.
     *
     * @throws IllegalArgumentException for a pid under 1 or a trace using more memory than the device has
     */
    public synchronized void setProcessTraces(int index, Map<Integer, UsageTrace> byPid) {
        int p = position(index);
        for (Map.Entry<Integer, UsageTrace> e : byPid.entrySet()) {
            if (e.getKey() == null || e.getKey() < 1) {
                throw new IllegalArgumentException("a simulated process needs a pid >= 1, was " + e.getKey());
            }
            checkMemory(p, Objects.requireNonNull(e.getValue(), "trace"));
        }
        advanceEnergy(p, UsageTrace.nanos(clock.instant()));
        processTraces.get(p).clear();
        processTraces.get(p).putAll(byPid);
        live |= !byPid.isEmpty();
    }

    /** @return whether the device reports an energy counter */
    public boolean hasEnergyCounter(int index) {
        return energyCounter[position(index)];
    }

    private void checkMemory(int p, UsageTrace t) {
        for (MemorySize m : t.memory()) {
            if (!devices.get(p).memory().isAtLeast(m)) {
                throw new IllegalArgumentException("GPU " + devices.get(p).index() + " has "
                        + devices.get(p).memory() + "; a trace cannot use " + m);
            }
        }
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
        advanceEnergy(p, UsageTrace.nanos(clock.instant()));
        traces[p] = null;
        processTraces.get(p).clear();
        metrics[p] = GpuMetrics.of(index, utilizationPercent, memoryUsed, temperatureCelsius, powerWatts,
                clock.instant());
        publish();
    }

    /** Marks a device as reporting no metrics (as a device whose sensors fail). */
    public synchronized void clearMetrics(int index) {
        int p = position(index);
        advanceEnergy(p, UsageTrace.nanos(clock.instant()));
        traces[p] = null;
        processTraces.get(p).clear();
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
        private final Map<Integer, UsageTrace> traces = new HashMap<>();
        private final Map<Integer, Map<Integer, UsageTrace>> processTraces = new HashMap<>();
        private final Map<Integer, Boolean> energyCounters = new HashMap<>();
        private boolean energyCounterDefault;

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

        /** @param index a device @param trace the usage it runs from the start @return this */
        public Builder trace(int index, UsageTrace trace) {
            traces.put(index, Objects.requireNonNull(trace, "trace"));
            return this;
        }

        /** @param index a device @param byPid processes scripted on it from the start @return this */
        public Builder processTraces(int index, Map<Integer, UsageTrace> byPid) {
            for (Integer pid : byPid.keySet()) {
                if (pid == null || pid < 1) {
                    throw new IllegalArgumentException("a simulated process needs a pid >= 1, was " + pid);
                }
            }
            processTraces.put(index, Map.copyOf(byPid));
            return this;
        }

        /** @param index a device @param v whether it reports an energy counter (else the node's) @return this */
        public Builder energyCounter(int index, boolean v) {
            energyCounters.put(index, v);
            return this;
        }

        /** @param v whether devices report an energy counter unless told per device (default false) @return this */
        public Builder energyCounters(boolean v) {
            energyCounterDefault = v;
            return this;
        }

        /** @return the node @throws IllegalArgumentException if a link names a device not on the node */
        public SimulatedGpuInventory build() {
            if (devices.isEmpty()) {
                throw new IllegalArgumentException("simulated node " + name + " has no devices");
            }
            devices.sort((x, y) -> Integer.compare(x.index(), y.index()));
            for (Integer i : traces.keySet()) {
                requireDevice(i);
            }
            for (Integer i : processTraces.keySet()) {
                requireDevice(i);
            }
            for (Integer i : energyCounters.keySet()) {
                requireDevice(i);
            }
            return new SimulatedGpuInventory(this);
        }

        private void requireDevice(int index) {
            if (devices.stream().noneMatch(d -> d.index() == index)) {
                throw new IllegalArgumentException("simulated node " + name + " has no GPU " + index);
            }
        }
    }
}
