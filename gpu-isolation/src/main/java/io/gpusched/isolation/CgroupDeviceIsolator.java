package io.gpusched.isolation;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuException;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.devices.DeviceNode;
import io.gpusched.core.devices.DevicePlan;
import io.gpusched.core.devices.GpuDeviceNodes;
import io.gpusched.core.devices.NvidiaModprobe;
import io.gpusched.core.host.CgroupMounts;
import io.gpusched.isolation.internal.Bpf;
import io.gpusched.isolation.internal.Libc;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.ReentrantLock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Fences GPU device nodes with the cgroup device controller: cgroup v1 ({@code devices.allow}/{@code devices.deny},
 * driven over a model of the kernel's behavior and exception list: grants first, then removals, never {@code a};
 * wildcards replaced by their exact complement; the host's own denies kept) or cgroup v2 (a
 * {@code BPF_PROG_TYPE_CGROUP_DEVICE} program through {@code bpf(2)}, attached with {@code BPF_F_ALLOW_MULTI} so the
 * host runtime's programs keep applying, swapped in with {@code BPF_F_REPLACE}; every other program of ours on the
 * cgroup is detached, whoever attached it). At every instant of a fence, update or revoke the job can open at most
 * the GPUs of the state before ∪ the state after. A cgroup is identified by its inode (cgroup id), not its path, and
 * must lie on cgroupfs ({@code statfs}). Access given is {@code rw}, never {@code m}. By default devices that are not
 * GPUs are left to the host's policy; {@link Builder#strict(List)} turns the fence into an allow-list. Calls for
 * different cgroups run concurrently; calls for one cgroup are serialized across the threads and processes of the node
 * (a {@code flock} in the state directory). A fence or update for a GPU the host's policy denies to the cgroup is
 * refused, naming the GPU, the cgroup and the rule. See {@code docs/ISOLATION.md}.
 * <p>
 * Every fence and update plans its nodes anew, reading {@code /proc/devices} then: a module loaded since the last
 * fence counts. When an NVIDIA allocation's {@code /dev/nvidia-uvm} major is unknown (the module is loaded on demand),
 * the isolator first runs {@code nvidia-modprobe -u -c=0} where it is installed ({@link Builder#nvidiaModprobe(Path)};
 * by default the one {@link NvidiaModprobe#find()} finds, when the proc root is {@code /proc}), as NVIDIA's container
 * toolkit does, and plans again; if the module still does not appear, it is not run again for
 * {@link #MODPROBE_RETRY} and the fence goes on without a uvm rule (a strict fence then denies uvm; its notes say
 * so).
 */
public final class CgroupDeviceIsolator implements DeviceIsolator {
    private static final Logger LOG = LoggerFactory.getLogger(CgroupDeviceIsolator.class);

    /** Which cgroup mechanism to use. */
    public enum Mechanism {
        /** By the hierarchy the cgroup path lies in. */
        AUTO,
        /** cgroup v1 devices controller. */
        V1,
        /** cgroup v2 eBPF device program. */
        V2
    }

    /** Devices a strict fence allows besides the GPU nodes: runc's defaults (null, zero, full, random, tty, pts…). */
    public static final List<DeviceRule> DEFAULT_BASE_ALLOW = List.of(
            DeviceRule.allowChar(1, 3, "rwm"), DeviceRule.allowChar(1, 5, "rwm"), DeviceRule.allowChar(1, 7, "rwm"),
            DeviceRule.allowChar(1, 8, "rwm"), DeviceRule.allowChar(1, 9, "rwm"), DeviceRule.allowChar(5, 0, "rwm"),
            DeviceRule.allowChar(5, 1, "rwm"), DeviceRule.allowChar(5, 2, "rwm"),
            DeviceRule.allowChar(136, DeviceRule.ANY, "rwm"), DeviceRule.allowChar(10, 200, "rwm"));

    /** Default node-wide directory of the fences' host-policy records ({@link Builder#stateDir(Path)}). */
    public static final Path DEFAULT_STATE_DIR = Path.of("/run/gpusched/isolation");

    /** How long after a run of nvidia-modprobe that left nvidia-uvm unloaded it is not run again. */
    public static final Duration MODPROBE_RETRY = Duration.ofSeconds(60);

    /** Name of our device programs in the kernel (15 characters at most). */
    public static final String PROGRAM_NAME = "gpusched_dev";

    final List<GpuDevice> hostDevices;
    final Mechanism mechanism;
    final boolean strict;
    final List<DeviceRule> baseAllow;
    final GpuDeviceNodes nodes;
    final CgroupMounts mounts;
    /** Loads nvidia-uvm before a fence that needs its major, or null. */
    private final NvidiaModprobe modprobe;
    private final Object modprobeLock = new Object();
    /** System.nanoTime() before which nvidia-modprobe is not run again; valid while {@link #modprobeQuiet}. */
    private long modprobeQuietUntil;
    private boolean modprobeQuiet;
    /** Node-wide state shared by every process: v1 records and the per-cgroup lock files. */
    final Path stateDir;
    /** Locks striped by path: a fixed set, so nothing grows with the number of cgroups ever fenced. */
    private final ReentrantLock[] locks = new ReentrantLock[64];
    final Map<Path, AbstractFence> active = new ConcurrentHashMap<>();
    private volatile Boolean replaceSupported;

    private CgroupDeviceIsolator(Builder b) {
        this.hostDevices = List.copyOf(b.hostDevices);
        this.mechanism = b.mechanism;
        this.strict = b.strict;
        this.baseAllow = List.copyOf(b.baseAllow);
        this.nodes = new GpuDeviceNodes(b.devRoot, b.procRoot, b.modeset);
        this.mounts = CgroupMounts.read(b.mountInfo);
        this.modprobe = b.modprobeAuto ? (b.procRoot.equals(Path.of("/proc")) ? NvidiaModprobe.find().orElse(null)
                : null) : b.modprobe;
        this.stateDir = b.stateDir;
        for (int i = 0; i < locks.length; i++) {
            locks[i] = new ReentrantLock();
        }
    }

    ReentrantLock lockFor(Path cgroup) {
        return locks[Math.floorMod(cgroup.hashCode(), locks.length)];
    }

    /** @return an isolator for this host's devices with defaults: auto mechanism, not strict, /dev, /proc */
    public static CgroupDeviceIsolator detect(List<GpuDevice> hostDevices) {
        return builder().hostDevices(hostDevices).build();
    }

    /** @return a builder */
    public static Builder builder() {
        return new Builder();
    }

    /** @return where the cgroup v1 devices hierarchy is mounted */
    public Optional<Path> v1Root() {
        return mounts.v1Devices();
    }

    /** @return where cgroup2 is mounted */
    public Optional<Path> v2Root() {
        return mounts.v2();
    }

    @Override
    public Optional<String> unavailabilityCause() {
        boolean v1 = mounts.v1Devices().isPresent() && mechanism != Mechanism.V2;
        boolean v2 = mounts.v2().isPresent() && mechanism != Mechanism.V1;
        if (!v1 && !v2) {
            return Optional.of(switch (mechanism) {
                case V1 -> "no cgroup v1 devices hierarchy is mounted (asked for v1)";
                case V2 -> "no cgroup2 hierarchy is mounted (asked for v2)";
                default -> "neither a cgroup v1 devices hierarchy nor cgroup2 is mounted";
            });
        }
        Libc libc = Libc.Holder.get();
        long euid = libc != null ? libc.geteuid() : effectiveUidFromProc();
        if (euid != 0) {
            return Optional.of("writing cgroup device rules needs root (CAP_SYS_ADMIN); running as uid "
                    + (euid < 0 ? "unknown (no libc and no /proc/self/status)" : euid));
        }
        if (libc == null) {
            return Optional.of("cgroup isolation needs libc through JNA (fstatfs, openat; bpf(2) for v2): "
                    + Libc.Holder.failure());
        }
        return Optional.empty();
    }

    /** @return the effective uid from /proc/self/status, or -1 when it cannot be read */
    static long effectiveUidFromProc() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
                if (line.startsWith("Uid:")) {
                    return Long.parseLong(line.substring(4).trim().split("\\s+")[1]);
                }
            }
        } catch (IOException | RuntimeException e) {
            return -1;
        }
        return -1;
    }

    /**
     * The node plan of an allocation on this host, from {@code /proc/devices} read now; when an NVIDIA allocation's
     * uvm major is unknown, after running nvidia-modprobe (see the class comment).
     *
     * @return the plan
     */
    public NodePlan plan(Allocation allocation) {
        try {
            DevicePlan p = nodes.plan(allocation, hostDevices);
            if (modprobe == null || !uvmByPath(p)) {
                return NodePlan.of(p);
            }
            List<String> notes = new ArrayList<>();
            synchronized (modprobeLock) {
                p = nodes.plan(allocation, hostDevices); // another fence may have loaded it meanwhile
                if (uvmByPath(p) && (!modprobeQuiet || System.nanoTime() - modprobeQuietUntil >= 0)) {
                    NvidiaModprobe.Result r = modprobe.loadUvm(NvidiaModprobe.DEFAULT_TIMEOUT);
                    p = nodes.plan(allocation, hostDevices);
                    boolean loaded = !uvmByPath(p);
                    modprobeQuiet = !loaded;
                    modprobeQuietUntil = System.nanoTime() + MODPROBE_RETRY.toNanos();
                    notes.add(r.summary() + (loaded ? "; nvidia-uvm is loaded" : "; nvidia-uvm is still not loaded"
                            + " (not tried again for " + MODPROBE_RETRY.toSeconds() + " s)"));
                    if (loaded) {
                        LOG.info("loaded nvidia-uvm for a fence: {}", r.summary());
                    } else {
                        LOG.warn("nvidia-uvm is not loaded, so fences cannot allow /dev/nvidia-uvm: {}", r.summary());
                    }
                }
            }
            return NodePlan.of(p).withNotes(notes);
        } catch (IsolationException e) {
            throw e;
        } catch (GpuException e) {
            throw new IsolationException(e.getMessage(), e);
        }
    }

    private static boolean uvmByPath(DevicePlan p) {
        return p.allowed().stream().anyMatch(n -> n.role().equals("uvm") && !n.numbered());
    }

    /**
     * @return a node for messages: its path and number, and the GPU it belongs to ("/dev/nvidia2 (c 195:2) of GPU 2
     *         GPU-…"), or that every GPU of its vendor needs it
     */
    String describe(DeviceNode n) {
        String what = n.path() + " (c " + n.major() + ":" + n.minor() + ")";
        if (n.isControl()) {
            return what + ", the " + n.role() + " node every GPU needs";
        }
        for (GpuDevice d : hostDevices) {
            try {
                if (nodes.plan("GPU " + d.index(), List.of(d), hostDevices).allowed().contains(n)) {
                    return what + " of GPU " + d.index() + " " + d.uuid();
                }
            } catch (GpuException e) {
                // a device the table cannot plan does not own the node
            }
        }
        return what;
    }

    @Override
    public Fence fence(Path cgroup, Allocation allocation) {
        Objects.requireNonNull(allocation, "allocation");
        return fence(cgroup, allocation, null);
    }

    /** The id of the allocation a {@link #fenceOff} fence reports. */
    public static final String DENY_ALL = "deny-all";

    /**
     * Denies every GPU device node of the host and the vendors' control nodes ({@code nvidiactl}, {@code nvidia-uvm},
     * {@code kfd}, ...) to {@code cgroup} and all its descendants: the node service's fence on login cgroups. On cgroup
     * v2 it is a device program like a job's (replacing any program of ours on the cgroup, so a restart replaces, never
     * stacks); on v1 the same exceptions a job fence writes. Its {@link Fence#allocation()} is an empty allocation
     * with id {@value #DENY_ALL}. Revoke it to give the cgroup back to the host's policy.
     *
     * @throws IsolationException as {@link #fence}, and when the host has no GPU to deny or a GPU without a device
     *                            minor (it could not be denied)
     */
    public Fence fenceOff(Path cgroup) {
        return fence(cgroup, new Allocation(DENY_ALL, List.of(), GpuRequest.builder().build(), Instant.EPOCH),
                denyAllPlan());
    }

    /** @return every GPU device node and vendor control node of the host: what {@link #fenceOff} denies */
    public List<DeviceNode> denyAllNodes() {
        return denyAllPlan().denied();
    }

    /** @return every GPU node and control node of the host as denied, none allowed */
    NodePlan denyAllPlan() {
        if (hostDevices.isEmpty()) {
            throw new IsolationException("no GPU is known on this host, so there is nothing to deny");
        }
        List<DeviceNode> denied = new ArrayList<>();
        List<Integer> majors = new ArrayList<>();
        List<String> notes = new ArrayList<>();
        for (GpuVendor v : hostDevices.stream().map(GpuDevice::vendor).distinct().toList()) {
            List<GpuDevice> all = hostDevices.stream().filter(d -> d.vendor() == v).toList();
            NodePlan p = plan(new Allocation(DENY_ALL, all, GpuRequest.builder().count(all.size()).build(),
                    Instant.EPOCH));
            for (DeviceNode n : p.allowed()) {
                if (!denied.contains(n)) {
                    denied.add(n);
                }
            }
            for (DeviceNode n : p.denied()) {
                if (!denied.contains(n)) {
                    denied.add(n);
                }
            }
            p.vendorMajors().stream().filter(m -> !majors.contains(m)).forEach(majors::add);
            notes.addAll(p.notes());
        }
        return new NodePlan(List.of(), denied, majors, notes);
    }

    private Fence fence(Path cgroup, Allocation allocation, NodePlan fixed) {
        Resolved r = resolve(cgroup);
        pruneGone();
        ReentrantLock lock = lockFor(r.path());
        lock.lock();
        try (CgroupLock node = CgroupLock.acquire(stateDir, r.id(), r.path())) {
            AbstractFence existing = active.get(r.path());
            if (existing != null && existing.isActive()) {
                if (existing.id().equals(r.id()) && fixed != null) {
                    // a deny-all fence takes over: what the old one put there is replaced as a dead fencer's would
                    // be (v2: our programs swapped; v1: the host's policy read back from the node-wide record)
                    existing.active = false;
                    existing.dropped();
                    active.remove(r.path(), existing);
                } else if (existing.id().equals(r.id())) {
                    existing.update(allocation);
                    return existing;
                } else {
                    existing.forgetGone("the cgroup at " + r.path() + " was removed and made again ("
                            + existing.id() + " is now " + r.id() + ")");
                }
            }
            NodePlan plan = fixed != null ? fixed : plan(allocation);
            AbstractFence f = r.v2() ? new V2Fence(this, r.path(), allocation, plan)
                    : new V1Fence(this, r.path(), allocation, plan);
            f.apply();
            active.put(r.path(), f);
            LOG.info("fenced cgroup {} ({}) for allocation {}: {} allowed, {} denied", r.path(), f.mechanism(),
                    allocation.id(), plan.allowed().size(), plan.denied().size());
            return f;
        } finally {
            lock.unlock();
        }
    }

    /** Forgets fences whose cgroup directory is gone, so the map only holds live cgroups. */
    private void pruneGone() {
        for (Map.Entry<Path, AbstractFence> e : active.entrySet()) {
            if (!Files.isDirectory(e.getKey())) {
                ReentrantLock l = lockFor(e.getKey());
                if (l.tryLock()) {
                    try {
                        if (active.get(e.getKey()) == e.getValue() && !Files.isDirectory(e.getKey())) {
                            e.getValue().forgetGone("its cgroup directory is gone");
                        }
                    } finally {
                        l.unlock();
                    }
                }
            }
        }
    }

    /** @return the number of fences this isolator keeps track of (live cgroups only) */
    int tracked() {
        return active.size();
    }

    /** A cgroup path checked to lie inside a mounted hierarchy, on the right filesystem, with its identity. */
    record Resolved(Path path, boolean v2, CgroupDir.Id id) {
    }

    Resolved resolve(Path cgroup) {
        Objects.requireNonNull(cgroup, "cgroup");
        unavailabilityCause().ifPresent(c -> {
            throw new IsolationException("cgroup isolation is unavailable: " + c);
        });
        if (!cgroup.isAbsolute()) {
            throw new IsolationException("cgroup path " + cgroup + " must be absolute");
        }
        for (Path part : cgroup) {
            if (part.toString().equals("..")) {
                throw new IsolationException("cgroup path " + cgroup + " contains \"..\"; give the cgroup's own path");
            }
        }
        List<Resolved> candidates = new ArrayList<>();
        if (mechanism != Mechanism.V1) {
            mounts.v2().ifPresent(m -> candidates.add(new Resolved(m, true, null)));
        }
        if (mechanism != Mechanism.V2) {
            mounts.v1Devices().ifPresent(m -> candidates.add(new Resolved(m, false, null)));
        }
        for (Resolved mount : candidates) {
            if (!cgroup.normalize().startsWith(mount.path())) {
                continue;
            }
            Path real;
            Path realMount;
            try {
                real = cgroup.toRealPath();
                realMount = mount.path().toRealPath();
            } catch (IOException e) {
                throw new IsolationException("no such cgroup: " + cgroup + " (" + e.getMessage() + ")");
            }
            if (!real.startsWith(realMount)) {
                throw new IsolationException("cgroup path " + cgroup + " resolves to " + real + ", outside the "
                        + (mount.v2() ? "cgroup2" : "cgroup v1 devices") + " hierarchy at " + mount.path());
            }
            if (!Files.isDirectory(real)) {
                throw new IsolationException(cgroup + " is not a cgroup (not a directory)");
            }
            if (real.equals(realMount)) {
                throw new IsolationException("refusing to fence the root cgroup " + real + "; create a child cgroup"
                        + " for the job");
            }
            CgroupDir.Id id;
            try (CgroupDir d = CgroupDir.open(real, mount.v2())) {
                String needed = mount.v2() ? "cgroup.procs" : "devices.list";
                if (!Files.isRegularFile(d.file(needed))) {
                    throw new IsolationException(cgroup + " is not a " + (mount.v2() ? "cgroup" : "devices cgroup")
                            + " (no " + needed + ")");
                }
                id = d.id;
            }
            return new Resolved(real, mount.v2(), id);
        }
        throw new IsolationException("cgroup path " + cgroup + " is not inside "
                + (candidates.isEmpty() ? "a usable hierarchy" : candidates.stream()
                        .map(c -> (c.v2() ? "cgroup2 at " : "the v1 devices hierarchy at ") + c.path())
                        .reduce((a, b) -> a + " or " + b).orElse(""))
                + " (mechanism " + mechanism + ")");
    }

    /** Probes once whether the kernel takes {@code BPF_F_REPLACE}; caches the answer. */
    boolean replaceSupported() {
        return replaceSupported == null || replaceSupported;
    }

    void replaceSupported(boolean v) {
        replaceSupported = v;
    }

    Bpf bpf() {
        Libc libc = Libc.Holder.get();
        if (libc == null) {
            throw new IsolationException("cgroup v2 needs bpf(2) through libc: " + Libc.Holder.failure());
        }
        return new Bpf(libc);
    }

    /** Builds a {@link CgroupDeviceIsolator}. */
    public static final class Builder {
        private List<GpuDevice> hostDevices;
        private Mechanism mechanism = Mechanism.AUTO;
        private boolean strict;
        private List<DeviceRule> baseAllow = List.of();
        private Path devRoot = Path.of("/dev");
        private Path procRoot = Path.of("/proc");
        private Path mountInfo = Path.of("/proc/self/mountinfo");
        private boolean modeset;
        private Path stateDir = DEFAULT_STATE_DIR;
        private boolean modprobeAuto = true;
        private NvidiaModprobe modprobe;

        private Builder() {
        }

        /** @param v every allocatable device of the host (the inventory's devices) @return this */
        public Builder hostDevices(List<GpuDevice> v) {
            hostDevices = List.copyOf(v);
            return this;
        }

        /** @param v mechanism (default AUTO: by the hierarchy of the cgroup path) @return this */
        public Builder mechanism(Mechanism v) {
            mechanism = Objects.requireNonNull(v, "mechanism");
            return this;
        }

        /**
         * Makes fences allow-lists: every device not allowed is denied.
         *
         * @param base devices still allowed (e.g. {@link #DEFAULT_BASE_ALLOW})
         * @return this
         */
        public Builder strict(List<DeviceRule> base) {
            strict = true;
            baseAllow = List.copyOf(base);
            return this;
        }

        /** @param v root of device nodes @return this */
        public Builder devRoot(Path v) {
            devRoot = Objects.requireNonNull(v);
            return this;
        }

        /** @param v root of procfs @return this */
        public Builder procRoot(Path v) {
            procRoot = Objects.requireNonNull(v);
            return this;
        }

        /** @param v mountinfo file to find hierarchies in @return this */
        public Builder mountInfo(Path v) {
            mountInfo = Objects.requireNonNull(v);
            return this;
        }

        /**
         * Where fences keep node-wide state: for each fenced v1 cgroup a record (the host's device list of a
         * default-deny cgroup, the denies fences added to a default-allow one), so that a later fence of the same
         * cgroup from any process (after a fencer died) still gives back exactly the host's policy; and, for v1 and
         * v2, the lock file that serializes fence operations on one cgroup across processes. Must be the same for
         * every process of the node and writable by root only; made (rwx------) when missing.
         *
         * @param v the directory (default {@link #DEFAULT_STATE_DIR}) @return this
         */
        public Builder stateDir(Path v) {
            stateDir = Objects.requireNonNull(v, "stateDir");
            return this;
        }

        /**
         * Runs this nvidia-modprobe (only while root alone can have written it) when a fence needs the nvidia-uvm
         * major and {@code /proc/devices} has none. Default: {@link NvidiaModprobe#find()} when the proc root is
         * {@code /proc}, none with another proc root (a fixture tree).
         *
         * @param binary absolute path of the helper
         * @return this
         */
        public Builder nvidiaModprobe(Path binary) {
            modprobe = NvidiaModprobe.at(binary);
            modprobeAuto = false;
            return this;
        }

        /** Never runs nvidia-modprobe: fences use {@code /proc/devices} as it is. @return this */
        public Builder noNvidiaModprobe() {
            modprobe = null;
            modprobeAuto = false;
            return this;
        }

        /** @param v whether jobs also get /dev/nvidia-modeset @return this */
        public Builder modeset(boolean v) {
            modeset = v;
            return this;
        }

        /** @return the isolator @throws IllegalStateException without host devices */
        public CgroupDeviceIsolator build() {
            if (hostDevices == null) {
                throw new IllegalStateException("an isolator needs the host's devices: builder().hostDevices(...)");
            }
            return new CgroupDeviceIsolator(this);
        }
    }
}
