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
import io.gpusched.core.PcieLevel;
import io.gpusched.nvml.internal.NvmlBinding;
import io.gpusched.nvml.internal.NvmlLayout;
import io.gpusched.nvml.internal.NvmlReturn;
import io.gpusched.nvml.internal.NvmlSession;
import io.gpusched.nvml.internal.NvmlSession.RawDevice;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.OptionalInt;
import java.util.concurrent.CopyOnWriteArrayList;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * NVIDIA GPUs through NVML. {@code nvmlInit_v2} once when opened, {@code nvmlShutdown} on {@link #close()}. Devices
 * and topology are read once; {@link #sample()} reuses native memory per device. With MIG on, each MIG device is an
 * allocatable child (index after the whole GPUs) and its parent is not allocatable. An XID watcher thread marks
 * devices unhealthy (application XIDs ignored) and lets them return once they answer again after a quiet period.
 */
public final class NvmlInventory implements GpuInventory {
    private static final Logger LOG = LoggerFactory.getLogger(NvmlInventory.class);

    private final NvmlOptions options;
    private final NvmlSession session;
    private final List<GpuDevice> devices;
    private final long[] handles;
    private final long[] parentHandles;
    private final int[] gpuInstance;
    private final int[] computeInstance;
    private final GpuTopology topology;
    private final NvmlSession.Poller poller;
    private final GpuHealth[] health;
    private final Instant[] unhealthySince;
    private final List<GpuHealthListener> listeners = new CopyOnWriteArrayList<>();
    private final Optional<String> driverVersion;
    private final OptionalInt cudaDriverVersion;
    private final Thread watcher;
    private volatile boolean closed;

    private NvmlInventory(NvmlOptions options, NvmlSession session) {
        this.options = options;
        this.session = session;
        this.driverVersion = session.driverVersion();
        this.cudaDriverVersion = session.cudaDriverVersion();
        List<RawDevice> raw = session.discover();
        int gpus = session.deviceCount();
        List<GpuDevice> devs = new ArrayList<>();
        handles = new long[raw.size()];
        parentHandles = new long[raw.size()];
        gpuInstance = new int[raw.size()];
        computeInstance = new int[raw.size()];
        int nextMigIndex = gpus;
        Map<Integer, Long> gpuHandle = new HashMap<>();
        for (int i = 0; i < raw.size(); i++) {
            RawDevice r = raw.get(i);
            handles[i] = r.handle();
            boolean mig = r.parentUuid().isPresent();
            if (!mig) {
                gpuHandle.put(r.nvmlIndex(), r.handle());
            }
            gpuInstance[i] = r.gpuInstanceId();
            computeInstance[i] = r.computeInstanceId();
            devs.add(toDevice(r, mig ? nextMigIndex++ : r.nvmlIndex()));
        }
        for (int i = 0; i < raw.size(); i++) {
            RawDevice r = raw.get(i);
            parentHandles[i] = r.parentUuid().isPresent() ? session.handle(r.nvmlIndex()) : r.handle();
        }
        this.devices = List.copyOf(devs);
        this.topology = readTopology(raw, devs, gpus);
        this.poller = session.new Poller(handles);
        this.health = new GpuHealth[devs.size()];
        this.unhealthySince = new Instant[devs.size()];
        java.util.Arrays.fill(health, GpuHealth.HEALTHY);
        this.watcher = options.watchHealth() ? startWatcher() : null;
    }

    /**
     * Opens NVML.
     *
     * @throws BackendUnavailableException with the cause ("library not found", "driver not loaded (NVML 9: …)", …)
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
        } catch (RuntimeException e) {
            s.close();
            throw new BackendUnavailableException("NVML initialized but reading devices failed: " + e.getMessage(),
                    List.of(), e);
        }
    }

    private GpuDevice toDevice(RawDevice r, int index) {
        GpuDevice.Builder b = GpuDevice.builder().index(index).uuid(r.uuid()).vendor(GpuVendor.NVIDIA).name(r.name())
                .memory(MemorySize.ofBytes(r.memoryTotal()))
                .pciBusId(PciBusIds.normalize(r.pciBusId()).orElse(r.pciBusId()));
        if (r.ccMajor() > 0 && r.ccMinor() >= 0 && r.ccMinor() <= 9) {
            b.computeCapability(new ComputeCapability(r.ccMajor(), r.ccMinor()));
        }
        PciBusIds.numaNode(options.sysfsRoot(), r.pciBusId()).ifPresent(b::numaNode);
        r.minor().ifPresent(b::minor);
        driverVersion.ifPresent(b::driverVersion);
        r.parentUuid().ifPresent(b::parentUuid);
        Map<String, String> props = new LinkedHashMap<>();
        props.put("nvml.index", String.valueOf(r.nvmlIndex()));
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

    /** PCIe levels per GPU pair, NVLink counts from each active link's remote bus id, NVSwitch as all-to-all. */
    private GpuTopology readTopology(List<RawDevice> raw, List<GpuDevice> devs, int gpus) {
        long[] gpuHandles = new long[gpus];
        Map<String, Integer> byBus = new HashMap<>();
        for (int g = 0; g < gpus; g++) {
            gpuHandles[g] = session.handle(g);
        }
        for (RawDevice r : raw) {
            PciBusIds.normalize(r.pciBusId()).ifPresent(b -> byBus.put(b, r.nvmlIndex()));
        }
        int[][] links = new int[gpus][gpus];
        int[] switchLinks = new int[gpus];
        for (int g = 0; g < gpus; g++) {
            for (String peer : session.nvLinkPeers(gpuHandles[g])) {
                if (peer.equals("NVSWITCH")) {
                    switchLinks[g]++;
                    continue;
                }
                Integer other = PciBusIds.normalize(peer).map(byBus::get).orElse(null);
                if (other != null && other != g) {
                    links[g][other]++;
                }
            }
        }
        PcieLevel[][] levels = new PcieLevel[gpus][gpus];
        for (int a = 0; a < gpus; a++) {
            for (int b = a + 1; b < gpus; b++) {
                OptionalInt level = session.commonAncestor(gpuHandles[a], gpuHandles[b]);
                levels[a][b] = level.isPresent() ? pcieLevel(level.getAsInt()) : null;
                int nv = Math.max(links[a][b], links[b][a]);
                if (switchLinks[a] > 0 && switchLinks[b] > 0) {
                    nv = Math.max(nv, Math.min(switchLinks[a], switchLinks[b]));
                }
                links[a][b] = nv;
                links[b][a] = nv;
            }
        }
        GpuTopology.Builder t = GpuTopology.builder(devs);
        for (int i = 0; i < devs.size(); i++) {
            for (int j = i + 1; j < devs.size(); j++) {
                int pa = raw.get(i).nvmlIndex();
                int pb = raw.get(j).nvmlIndex();
                int ia = devs.get(i).index();
                int ib = devs.get(j).index();
                if (pa == pb) {
                    t.pcie(ia, ib, PcieLevel.INTERNAL);
                    continue;
                }
                int lo = Math.min(pa, pb);
                int hi = Math.max(pa, pb);
                if (levels[lo][hi] != null) {
                    t.pcie(ia, ib, levels[lo][hi]);
                }
                if (links[lo][hi] > 0) {
                    t.links(ia, ib, links[lo][hi]);
                }
            }
        }
        return t.build();
    }

    static PcieLevel pcieLevel(int nvmlLevel) {
        return switch (nvmlLevel) {
            case 0 -> PcieLevel.INTERNAL;
            case 10 -> PcieLevel.SINGLE;
            case 20 -> PcieLevel.MULTIPLE;
            case 30 -> PcieLevel.HOSTBRIDGE;
            case 40 -> PcieLevel.NODE;
            default -> PcieLevel.SYSTEM;
        };
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
     * records are the only allocation. A device answering {@code GPU_IS_LOST} is marked LOST.
     */
    @Override
    public GpuSample sample() {
        Instant now = options.clock().instant();
        List<GpuMetrics> out = new ArrayList<>(devices.size());
        List<Integer> lost = new ArrayList<>();
        synchronized (poller) {
            ensureOpen();
            poller.sweep();
            long[] v = poller.values();
            for (int i = 0; i < devices.size(); i++) {
                int base = i * NvmlSession.Poller.STRIDE;
                if (v[base] == NvmlReturn.ERROR_GPU_IS_LOST.code()) {
                    lost.add(i);
                }
                out.add(new GpuMetrics(devices.get(i).index(),
                        v[base + 1] == NvmlSession.Poller.ABSENT ? OptionalDouble.empty() : OptionalDouble.of(v[base + 1]),
                        v[base + 2] == NvmlSession.Poller.ABSENT || v[base + 2] == NvmlLayout.VALUE_NOT_AVAILABLE
                                ? Optional.empty() : Optional.of(MemorySize.ofBytes(v[base + 2])),
                        v[base + 3] == NvmlSession.Poller.ABSENT ? OptionalDouble.empty() : OptionalDouble.of(v[base + 3]),
                        v[base + 4] == NvmlSession.Poller.ABSENT ? OptionalDouble.empty()
                                : OptionalDouble.of(v[base + 4] / 1000.0),
                        now));
            }
        }
        for (int i : lost) {
            setHealth(i, GpuHealth.lost("NVML: GPU is lost (fell off the bus or is otherwise inaccessible)"));
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

    @Override
    public Optional<List<GpuProcess>> processes(GpuDevice device) {
        int i = position(device);
        Optional<List<long[]>> raw;
        synchronized (poller) {
            ensureOpen();
            raw = session.processes(handles[i]);
        }
        return raw.map(list -> list.stream().map(p -> new GpuProcess((int) p[0],
                p[1] < 0 ? Optional.empty() : Optional.of(MemorySize.ofBytes(p[1])))).toList());
    }

    @Override
    public GpuHealth health(GpuDevice device) {
        return health[position(device)];
    }

    private int position(GpuDevice device) {
        for (int i = 0; i < devices.size(); i++) {
            if (devices.get(i).uuid().equals(device.uuid())) {
                return i;
            }
        }
        throw new IllegalArgumentException("device " + device.uuid() + " is not in this NVML inventory");
    }

    private void setHealth(int i, GpuHealth h) {
        synchronized (health) {
            if (health[i].equals(h)) {
                return;
            }
            health[i] = h;
            unhealthySince[i] = h.isHealthy() ? null : options.clock().instant();
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

    private Thread startWatcher() {
        List<Long> physical = new ArrayList<>();
        for (long p : parentHandles) {
            if (!physical.contains(p)) {
                physical.add(p);
            }
        }
        NvmlSession.EventWatch watch;
        try {
            watch = session.new EventWatch(physical.stream().mapToLong(Long::longValue).toArray());
        } catch (NvmlSession.NvmlCallException e) {
            LOG.debug("XID health watching unavailable: {}", e.getMessage());
            return null;
        }
        Thread t = new Thread(() -> watchLoop(watch), "gpusched-nvml-xid-watcher");
        t.setDaemon(true);
        t.start();
        return t;
    }

    private void watchLoop(NvmlSession.EventWatch watch) {
        int timeout = (int) Math.min(Integer.MAX_VALUE, options.eventWait().toMillis());
        try {
            while (!closed) {
                int rc = watch.await(timeout);
                if (closed) {
                    break;
                }
                if (rc == 0 && (watch.lastType() & NvmlLayout.EVENT_TYPE_XID) != 0) {
                    onXid(watch.lastDevice(), watch.lastData(), watch.lastGpuInstance(), watch.lastComputeInstance());
                } else if (rc == NvmlReturn.ERROR_GPU_IS_LOST.code()) {
                    probeAll();
                } else if (rc != 0 && rc != NvmlReturn.ERROR_TIMEOUT.code()) {
                    LOG.debug("nvmlEventSetWait_v2: {}", NvmlReturn.describe(rc));
                    Thread.sleep(timeout);
                }
                recover();
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            watch.close();
        }
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
            setHealth(i, GpuHealth.unhealthy("XID " + xid));
        }
    }

    private void probeAll() {
        for (int i = 0; i < devices.size(); i++) {
            int rc;
            synchronized (poller) {
                if (closed) {
                    return;
                }
                rc = session.probe(handles[i]);
            }
            if (rc == NvmlReturn.ERROR_GPU_IS_LOST.code()) {
                setHealth(i, GpuHealth.lost("NVML: GPU is lost (fell off the bus or is otherwise inaccessible)"));
            }
        }
    }

    /** A device that is not healthy returns once it answers again after the quiet period. */
    private void recover() {
        Instant now = options.clock().instant();
        for (int i = 0; i < devices.size(); i++) {
            Instant since;
            synchronized (health) {
                since = unhealthySince[i];
            }
            if (since == null || since.plus(options.recoveryAfter()).isAfter(now)) {
                continue;
            }
            int rc;
            synchronized (poller) {
                if (closed) {
                    return;
                }
                rc = session.probe(handles[i]);
            }
            if (rc == 0) {
                setHealth(i, GpuHealth.HEALTHY);
            } else {
                synchronized (health) {
                    unhealthySince[i] = now;
                }
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

    /** Stops the watcher, then calls {@code nvmlShutdown}. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        if (watcher != null) {
            try {
                watcher.join(options.eventWait().toMillis() * 4 + 1000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        synchronized (poller) {
            session.close();
        }
        listeners.clear();
    }

    @Override
    public String toString() {
        return "nvml (" + devices.size() + " devices, driver " + driverVersion.orElse("?") + ")";
    }
}
