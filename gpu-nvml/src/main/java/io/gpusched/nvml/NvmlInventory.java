package io.gpusched.nvml;

import io.gpusched.core.BackendUnavailableException;
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
import io.gpusched.core.ProcessUsageSample;
import io.gpusched.nvml.internal.NvmlBinding;
import io.gpusched.nvml.internal.NvmlEventWatch;
import io.gpusched.nvml.internal.NvmlLayout;
import io.gpusched.nvml.internal.NvmlPoller;
import io.gpusched.nvml.internal.NvmlSession;
import io.gpusched.nvml.internal.NvmlSession.RawDevice;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.OptionalInt;
import java.util.OptionalLong;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * NVIDIA GPUs through NVML. {@code nvmlInit_v2} once when opened, {@code nvmlShutdown} on {@link #close()}. Devices
 * and topology are read once; {@link #sample()} reuses native memory per device. With MIG on, each MIG device is an
 * allocatable child (index after the whole GPUs) and its parent is not allocatable.
 *
 * <p>Health. Every device gets its health from discovery: a call about it that answers an error other than
 * NOT_SUPPORTED makes it {@link GpuHealth.State#LOST LOST} ({@code GPU_IS_LOST}) or
 * {@link GpuHealth.State#UNHEALTHY UNHEALTHY} (any other code, named in the reason); the other GPUs are served.
 * A GPU whose handle or UUID cannot be read is listed under the placeholder UUID
 * {@code unidentified-nvml-<nvml index>} (or {@code unidentified-nvml-<index>-mig-<slot>}), which no real
 * {@code GPU-}/{@code MIG-} UUID can equal, with memory unknown; it and a GPU whose MIG layout cannot be read stay
 * out of service until the inventory is reopened. Later, live calls (the sweep of {@link #sample()}, the process
 * list, the XID watcher's probes) move a device to LOST or UNHEALTHY the same way, and XID events (application
 * XIDs ignored) make it UNHEALTHY. A device returns to HEALTHY only after its live metric calls (utilization,
 * memory, temperature) have answered without error for the whole {@link NvmlOptions#recoveryAfter() recovery
 * period}; {@link #sample()} runs these checks, and the watcher, when on, runs them between events.
 *
 * <p>Why it is over 500 lines: it is where discovery's results, the live sweep, the per-process reads and the health
 * state machine meet a device's lock and lifecycle; each part's logic lives elsewhere ({@link DeviceHealth},
 * {@link NvmlProcessUsage}, {@code NvmlPoller}, {@code NvmlSession}).
 */
public final class NvmlInventory implements GpuInventory {
    private static final Logger LOG = LoggerFactory.getLogger(NvmlInventory.class);

    /** Prefix of the placeholder UUID of a GPU whose identity NVML would not give. */
    public static final String UNIDENTIFIED_PREFIX = "unidentified-nvml-";

    private final NvmlOptions options;
    private final NvmlSession session;
    private final List<GpuDevice> devices;
    private final long[] handles;
    private final long[] parentHandles;
    private final int[] gpuInstance;
    private final int[] computeInstance;
    /** per device: the newest per-process utilization sample read (µs), guarded by the poller */
    private final long[] lastSeen;
    private final GpuTopology topology;
    private final NvmlPoller poller;
    private final DeviceHealth health;
    private final List<GpuHealthListener> listeners = new CopyOnWriteArrayList<>();
    private final Optional<String> driverVersion;
    private final OptionalInt cudaDriverVersion;
    private final Object lifecycle = new Object();
    private final XidWatcher watcher;
    private volatile boolean closed;

    private NvmlInventory(NvmlOptions options, NvmlSession session) {
        this.options = options;
        this.session = session;
        this.driverVersion = session.driverVersion();
        this.cudaDriverVersion = session.cudaDriverVersion();
        NvmlSession.Discovery found = session.discover();
        List<RawDevice> raw = found.devices();
        int gpus = found.gpuCount();
        int n = raw.size();
        List<GpuDevice> devs = new ArrayList<>();
        handles = new long[n];
        parentHandles = new long[n];
        gpuInstance = new int[n];
        computeInstance = new int[n];
        lastSeen = new long[n];
        health = new DeviceHealth(n, options.clock(), options.recoveryAfter(),
                (call, status) -> toHealth(new NvmlSession.Fault(call, status), Optional.empty()));
        int nextMigIndex = gpus;
        for (int i = 0; i < n; i++) {
            RawDevice r = raw.get(i);
            boolean mig = r.migSlot() >= 0;
            handles[i] = r.handle();
            parentHandles[i] = mig ? found.gpuHandles()[r.nvmlIndex()] : r.handle();
            gpuInstance[i] = r.gpuInstanceId();
            computeInstance[i] = r.computeInstanceId();
            health.start(i, r.fault().map(f -> toHealth(f, r.pinnedBecause())).orElse(GpuHealth.HEALTHY),
                    r.pinnedBecause().isPresent());
            devs.add(toDevice(r, mig ? nextMigIndex++ : r.nvmlIndex()));
        }
        this.devices = List.copyOf(devs);
        Set<Integer> suspects = new HashSet<>();
        this.topology = NvmlTopology.read(session, raw, devs, found, suspects, (gpu, f) -> openFault(raw, gpu, f));
        this.poller = new NvmlPoller(session, handles);
        for (int i = 0; i < n; i++) {
            if (suspects.contains(raw.get(i).nvmlIndex())) {
                liveCheck(i);
            }
        }
        this.watcher = options.watchHealth() ? startWatcher() : null;
    }

    /**
     * Opens NVML. One failing GPU does not fail the node: it is listed with its health (see the class comment).
     *
     * @throws BackendUnavailableException when the library cannot be loaded, {@code nvmlInit_v2} fails ("driver not
     *                                     loaded (NVML 9: …)", …) or the device count cannot be read
     */
    public static NvmlInventory open(NvmlOptions options) {
        NvmlSession s;
        try {
            s = NvmlSession.open(options.library());
        } catch (NvmlBinding.NvmlLoadException e) {
            throw new BackendUnavailableException(e.getMessage());
        } catch (NvmlSession.NvmlCallException e) {
            throw new BackendUnavailableException(NvmlInventoryProvider.describeInitFailure(e.code()));
        }
        try {
            return new NvmlInventory(options, s);
        } catch (NvmlSession.NvmlCallException e) {
            s.close();
            throw new BackendUnavailableException("NVML initialized but " + e.getMessage(), List.of(), null);
        } catch (RuntimeException e) {
            s.close();
            throw new BackendUnavailableException("NVML initialized but reading devices failed: " + e,
                    List.of(), null);
        }
    }

    private static GpuHealth toHealth(NvmlSession.Fault f, Optional<String> pinnedBecause) {
        String reason = f.describe() + pinnedBecause.map(p -> " (" + p + "; kept out until the inventory is reopened)")
                .orElse("");
        return f.lost() ? GpuHealth.lost(reason) : GpuHealth.unhealthy(reason);
    }

    private GpuDevice toDevice(RawDevice r, int index) {
        String uuid = r.uuid().orElseGet(() -> UNIDENTIFIED_PREFIX + r.nvmlIndex()
                + (r.migSlot() >= 0 ? "-mig-" + r.migSlot() : ""));
        String bus = r.pciBusId().orElse("unknown-" + r.nvmlIndex());
        GpuDevice.Builder b = GpuDevice.builder().index(index).uuid(uuid).vendor(GpuVendor.NVIDIA)
                .name(r.name().orElse(r.uuid().isPresent() ? "NVIDIA GPU" : "NVIDIA GPU (unidentified)"))
                .pciBusId(PciBusIds.normalize(bus).orElse(bus));
        if (r.memoryTotal().isPresent()) {
            b.memory(MemorySize.ofBytes(r.memoryTotal().getAsLong()));
        } else {
            b.memoryUnknown();
        }
        if (r.ccMajor() > 0 && r.ccMinor() >= 0 && r.ccMinor() <= 9) {
            b.computeCapability(new ComputeCapability(r.ccMajor(), r.ccMinor()));
        }
        r.pciBusId().ifPresent(p -> PciBusIds.numaNode(options.sysfsRoot(), p).ifPresent(b::numaNode));
        r.minor().ifPresent(b::minor);
        driverVersion.ifPresent(b::driverVersion);
        r.parentUuid().ifPresent(b::parentUuid);
        Map<String, String> props = new LinkedHashMap<>();
        props.put("nvml.index", String.valueOf(r.nvmlIndex()));
        if (r.uuid().isEmpty()) {
            props.put("nvml.identity", "placeholder: " + r.fault().map(NvmlSession.Fault::describe).orElse("?"));
        }
        r.serial().ifPresent(s -> props.put("serial", s));
        r.persistence().ifPresent(p -> props.put("persistence_mode", p ? "Enabled" : "Disabled"));
        props.put("mig_mode", r.migEnabled() ? "Enabled" : "Disabled");
        if (r.parentUuid().isPresent()) {
            props.put("mig.gpu_instance_id", String.valueOf(r.gpuInstanceId()));
            props.put("mig.compute_instance_id", String.valueOf(r.computeInstanceId()));
        }
        cudaDriverVersion.ifPresent(v -> props.put("cuda_driver_version", v / 1000 + "." + (v % 1000) / 10));
        return b.properties(props).build();
    }

    /** Marks every device of physical GPU {@code gpu} with a fault found after discovery (still inside open). */
    private void openFault(List<RawDevice> raw, int gpu, NvmlSession.Fault f) {
        for (int i = 0; i < raw.size(); i++) {
            if (raw.get(i).nvmlIndex() == gpu) {
                health.openFault(i, toHealth(f, Optional.empty()));
            }
        }
    }

    @Override
    public String backend() {
        return "nvml";
    }

    @Override
    public List<GpuDevice> devices() {
        return devices;
    }

    @Override
    public GpuTopology topology() {
        return topology;
    }

    /** @return the driver version NVML reports */
    public Optional<String> driverVersion() {
        return driverVersion;
    }

    /** @return the driver's CUDA version as 1000 x major + 10 x minor (12040 for 12.4) */
    public OptionalInt cudaDriverVersion() {
        return cudaDriverVersion;
    }

    /** @return the library path or name NVML was loaded from */
    public String libraryPath() {
        return session.binding().path();
    }

    /**
     * One sweep of every device. The native reads reuse one block per device and allocate nothing; the result
     * records and three small per-device arrays (the health bookkeeping, applied outside the NVML lock) are the
     * only allocation. A device whose calls fail becomes LOST or UNHEALTHY; one that is not healthy and answers its
     * live calls counts towards its recovery.
     *
     * @throws IllegalStateException when the inventory is closed
     */
    @Override
    public GpuSample sample() {
        Instant now = options.clock().instant();
        int n = devices.size();
        List<GpuMetrics> out = new ArrayList<>(n);
        int[] status = new int[n];
        int[] answers = new int[n];
        String[] failedCall = new String[n];
        synchronized (poller) {
            ensureOpen();
            poller.sweep();
            long[] v = poller.values();
            for (int i = 0; i < n; i++) {
                int base = i * NvmlPoller.STRIDE;
                status[i] = (int) v[base];
                answers[i] = poller.liveAnswers(i);
                failedCall[i] = poller.failedCall(i);
                out.add(new GpuMetrics(devices.get(i).index(),
                        v[base + 1] == NvmlPoller.ABSENT ? OptionalDouble.empty() : OptionalDouble.of(v[base + 1]),
                        v[base + 2] == NvmlPoller.ABSENT || v[base + 2] == NvmlLayout.VALUE_NOT_AVAILABLE
                                ? Optional.empty() : Optional.of(MemorySize.ofBytes(v[base + 2])),
                        v[base + 3] == NvmlPoller.ABSENT ? OptionalDouble.empty() : OptionalDouble.of(v[base + 3]),
                        v[base + 4] == NvmlPoller.ABSENT ? OptionalDouble.empty()
                                : OptionalDouble.of(v[base + 4] / 1000.0),
                        now,
                        v[base + 5] == NvmlPoller.ABSENT ? OptionalLong.empty() : OptionalLong.of(v[base + 5])));
            }
        }
        for (int i = 0; i < n; i++) {
            announce(i, health.live(i, status[i], answers[i], failedCall[i]));
        }
        return new GpuSample(now, out);
    }

    /** Runs the sweep alone, without building records: for the polling benchmark. @return the raw values array */
    long[] sweepRaw() {
        synchronized (poller) {
            poller.sweep();
            return poller.values();
        }
    }

    /**
     * Lists the compute processes of a device.
     *
     * @return the processes; empty when this driver cannot list them, and empty when the device cannot be asked
     *         (no handle) or its call fails: then the failure is recorded in {@link #health(GpuDevice)} (LOST or
     *         UNHEALTHY with the NVML error) and no exception is thrown
     * @throws IllegalArgumentException when the device is not one of {@link #devices()}
     * @throws IllegalStateException    when the inventory is closed
     */
    @Override
    public Optional<List<GpuProcess>> processes(GpuDevice device) {
        int i = position(device);
        Optional<List<long[]>> raw;
        NvmlSession.Fault fault = null;
        synchronized (poller) {
            ensureOpen();
            if (handles[i] == 0) {
                return Optional.empty();
            }
            try {
                raw = session.processes(handles[i]);
            } catch (NvmlSession.NvmlCallException e) {
                raw = Optional.empty();
                fault = e.fault();
            }
        }
        if (fault != null) {
            announce(i, health.degrade(i, toHealth(fault, Optional.empty())));
            return Optional.empty();
        }
        return raw.map(list -> list.stream().map(p -> new GpuProcess((int) p[0],
                p[1] < 0 ? Optional.empty() : Optional.of(MemorySize.ofBytes(p[1])))).toList());
    }

    /** Why a MIG device has no per-process utilization. */
    public static final String MIG_UTILIZATION = "MIG: NVML has no per-process utilization on MIG devices"
            + " (nvmlDeviceGetProcessUtilization is not supported there)";

    /**
     * What each process used on a device since the previous call for that device: SM utilization from
     * {@code nvmlDeviceGetProcessUtilization} (the mean of each process's samples newer than the newest sample the
     * previous call read; the first call reads the driver's whole buffer) and memory from
     * {@code nvmlDeviceGetComputeRunningProcesses_v3}. What cannot be read is said, not guessed: on a MIG device
     * utilization is "not measured" ({@link #MIG_UTILIZATION}) while memory is read per process where the driver gives
     * it; NOT_SUPPORTED, NO_PERMISSION and a driver without the call each leave that figure "not measured" with the
     * NVML answer as the reason. Any other error is a fault of the device (its health, as {@link #processes} records
     * it), and the sample says both figures are not measured, naming the error.
     *
     * @return the sample; empty only when this driver's NVML has neither call
     * @throws IllegalArgumentException when the device is not one of {@link #devices()}
     * @throws IllegalStateException    when the inventory is closed
     */
    @Override
    public Optional<ProcessUsageSample> processUsage(GpuDevice device) {
        int i = position(device);
        boolean mig = device.isPartition();
        Instant now = options.clock().instant();
        NvmlSession.ProcessList running = null;
        NvmlSession.ProcessList samples = null;
        NvmlSession.Fault fault = null;
        long seen;
        synchronized (poller) {
            ensureOpen();
            if (!session.binding().has(NvmlBinding.Fn.PROCESSES)
                    && (mig || !session.binding().has(NvmlBinding.Fn.PROCESS_UTILIZATION))) {
                return Optional.empty();
            }
            if (handles[i] == 0) {
                String why = "the device could not be reached when NVML was opened";
                return Optional.of(new ProcessUsageSample(now, List.of(), Optional.of(why), Optional.of(why)));
            }
            seen = lastSeen[i];
            try {
                running = session.runningProcesses(handles[i]);
                if (!mig) {
                    samples = session.processUtilization(handles[i], seen);
                }
            } catch (NvmlSession.NvmlCallException e) {
                fault = e.fault();
            }
            if (fault == null && samples != null && samples.code() == 0) {
                lastSeen[i] = NvmlProcessUsage.newest(samples.processes(), seen);
            }
        }
        if (fault != null) {
            announce(i, health.degrade(i, toHealth(fault, Optional.empty())));
            String why = fault.describe();
            return Optional.of(new ProcessUsageSample(now, List.of(), Optional.of(why), Optional.of(why)));
        }
        return Optional.of(NvmlProcessUsage.assemble(now, mig, running, samples, seen));
    }

    @Override
    public GpuHealth health(GpuDevice device) {
        return health.get(position(device));
    }

    private int position(GpuDevice device) {
        for (int i = 0; i < devices.size(); i++) {
            if (devices.get(i).uuid().equals(device.uuid())) {
                return i;
            }
        }
        throw new IllegalArgumentException("device " + device.uuid() + " is not in this NVML inventory");
    }

    /** Reads device {@code i}'s live metrics alone and applies the result; false when closed. */
    private boolean liveCheck(int i) {
        int status;
        int answers;
        String failedCall;
        synchronized (poller) {
            if (closed) {
                return false;
            }
            poller.sweepOne(i);
            status = (int) poller.values()[i * NvmlPoller.STRIDE];
            answers = poller.liveAnswers(i);
            failedCall = poller.failedCall(i);
        }
        announce(i, health.live(i, status, answers, failedCall));
        return true;
    }

    /** Logs and tells the listeners a change of device {@code i}'s health; {@code h} null: no change. */
    private void announce(int i, GpuHealth h) {
        if (h == null) {
            return;
        }
        GpuDevice d = devices.get(i);
        if (h.isHealthy()) {
            LOG.info("GPU {} ({}) is healthy again", d.index(), d.uuid());
        } else {
            LOG.warn("GPU {} ({}) is {}", d.index(), d.uuid(), h);
        }
        for (GpuHealthListener l : listeners) {
            try {
                l.onHealthChange(d, h);
            } catch (RuntimeException e) {
                LOG.warn("health listener failed: {}", e.toString());
            }
        }
    }

    private XidWatcher startWatcher() {
        List<Long> physical = new ArrayList<>();
        for (long p : parentHandles) {
            if (p != 0 && !physical.contains(p)) {
                physical.add(p);
            }
        }
        NvmlEventWatch watch;
        try {
            watch = new NvmlEventWatch(session, physical.stream().mapToLong(Long::longValue).toArray());
        } catch (NvmlSession.NvmlCallException e) {
            LOG.debug("XID health watching unavailable: {}", e.getMessage());
            return null;
        }
        watch.faults().forEach((handle, f) -> {
            for (int i = 0; i < devices.size(); i++) {
                if (parentHandles[i] == handle) {
                    health.openFault(i, toHealth(f, Optional.empty()));
                }
            }
        });
        XidWatcher w = new XidWatcher(watch, options.eventWait(), new XidWatcher.Events() {
            @Override
            public void xid(long device, long xid, long gpuInstance, long computeInstance) {
                onXid(device, xid, gpuInstance, computeInstance);
            }

            @Override
            public void lost() {
                probeAll();
            }

            @Override
            public void round() {
                recover();
            }
        }, this::shutdown);
        w.start();
        return w;
    }

    private void onXid(long device, long xid, long gi, long ci) {
        if (options.ignoredXids().contains(xid)) {
            LOG.debug("XID {} on device handle {} is an application error; ignored", xid, device);
            return;
        }
        boolean attributed = gi != 0xFFFFFFFFL && ci != 0xFFFFFFFFL;
        for (int i = 0; i < devices.size(); i++) {
            if (parentHandles[i] != device) {
                continue;
            }
            boolean isMig = devices.get(i).isPartition();
            if (attributed && isMig && (gpuInstance[i] != gi || computeInstance[i] != ci)) {
                continue;
            }
            announce(i, health.degrade(i, GpuHealth.unhealthy("XID " + xid)));
        }
    }

    /** NVML said a GPU is lost without saying which: a live check of every device. */
    private void probeAll() {
        for (int i = 0; i < devices.size(); i++) {
            if (!liveCheck(i)) {
                return;
            }
        }
    }

    /** Live checks of the devices that are not healthy, so that they can return without anyone sampling. */
    private void recover() {
        for (int i = 0; i < devices.size(); i++) {
            if (health.recovering(i) && !liveCheck(i)) {
                return;
            }
        }
    }

    private void ensureOpen() {
        if (closed) {
            throw new IllegalStateException("NVML inventory is closed");
        }
    }

    @Override
    public void addHealthListener(GpuHealthListener listener) {
        listeners.add(listener);
    }

    @Override
    public void removeHealthListener(GpuHealthListener listener) {
        listeners.remove(listener);
    }

    /**
     * Stops the watcher, then calls {@code nvmlShutdown}. The watcher frees its event set before the shutdown; if it
     * is still inside {@code nvmlEventSetWait_v2} after a bounded wait (a driver that does not honour the timeout),
     * the shutdown is left to the watcher, which does it as soon as the call returns: NVML is never shut down under
     * a thread that is inside it (see {@link XidWatcher}). Idempotent.
     */
    @Override
    public void close() {
        synchronized (lifecycle) {
            if (closed) {
                return;
            }
            closed = true;
        }
        listeners.clear();
        if (watcher != null && !watcher.stop()) { // a listener may close from the watcher thread: stop() allows it
            return; // the watcher shuts NVML down when it leaves nvmlEventSetWait_v2
        }
        shutdown();
    }

    private void shutdown() {
        synchronized (poller) {
            session.close();
        }
    }

    @Override
    public String toString() {
        return "nvml (" + devices.size() + " devices, driver " + driverVersion.orElse("?") + ")";
    }
}
