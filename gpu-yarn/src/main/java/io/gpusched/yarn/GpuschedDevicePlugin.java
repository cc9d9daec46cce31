package io.gpusched.yarn;

import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationStrategies;
import io.gpusched.core.AllocationStrategy;
import io.gpusched.core.DeviceState;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.SchedulingView;
import io.gpusched.core.devices.DeviceNode;
import io.gpusched.core.devices.GpuDeviceNodes;
import io.gpusched.core.host.InventorySpec;
import io.gpusched.cuda.CudaEnvironment;
import io.gpusched.cuda.CudaEnvironmentResolver;
import io.gpusched.cuda.CudaRequirement;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Pattern;
import org.apache.hadoop.conf.Configurable;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.yarn.server.nodemanager.api.deviceplugin.Device;
import org.apache.hadoop.yarn.server.nodemanager.api.deviceplugin.DevicePlugin;
import org.apache.hadoop.yarn.server.nodemanager.api.deviceplugin.DevicePluginScheduler;
import org.apache.hadoop.yarn.server.nodemanager.api.deviceplugin.DeviceRegisterRequest;
import org.apache.hadoop.yarn.server.nodemanager.api.deviceplugin.DeviceRuntimeSpec;
import org.apache.hadoop.yarn.server.nodemanager.api.deviceplugin.MountDeviceSpec;
import org.apache.hadoop.yarn.server.nodemanager.api.deviceplugin.MountVolumeSpec;
import org.apache.hadoop.yarn.server.nodemanager.api.deviceplugin.YarnRuntimeType;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A YARN NodeManager device plugin over gpusched, for Hadoop's pluggable device framework. It reports the node's
 * GPUs from a {@link GpuInventory} (device numbers, PCI bus id, health), chooses among the GPUs YARN offers with
 * gpusched's topology-aware strategy (unhealthy GPUs are never chosen), and dresses an allocation with the job
 * environment from gpu-cuda: for the Docker runtime the environment, the device nodes and read-only volumes, for the
 * default runtime the environment alone.
 *
 * <p>Enable it in {@code yarn-site.xml}:
 * <pre>
 * yarn.nodemanager.pluggable-device-framework.enabled = true
 * yarn.nodemanager.pluggable-device-framework.device-classes = io.gpusched.yarn.GpuschedDevicePlugin
 * </pre>
 * and declare the resource ({@code nvidia.com/gpu} by default) in {@code resource-types.xml}. Settings are read from
 * the NodeManager's configuration (the framework builds the plugin through {@code ReflectionUtils.newInstance}, which
 * calls {@link #setConf}); see the {@code KEY_*} constants.
 *
 * <p>Why it is over 500 lines: Hadoop's two interfaces (device discovery and scheduling) and the runtime spec are
 * one class by YARN's contract (the NodeManager instantiates one class by name); the keys it reads, documented
 * here, take a third of it. Capacity, container records and the placement cache are types of their own.
 */
public class GpuschedDevicePlugin implements DevicePlugin, DevicePluginScheduler, Configurable {

    /** Resource name registered with YARN; default {@value #DEFAULT_RESOURCE_NAME}. */
    public static final String KEY_RESOURCE_NAME = "gpusched.yarn.resource-name";
    /** Default resource name, the one YARN's own NVIDIA plugin registers. */
    public static final String DEFAULT_RESOURCE_NAME = "nvidia.com/gpu";
    /**
     * Where the GPUs come from: {@code auto} (detect the node; default) or {@code simulated:<profile or YAML path>}.
     */
    public static final String KEY_INVENTORY = "gpusched.yarn.inventory";
    /**
     * Strategy among the offered GPUs: {@code topology} (default), {@code packing}, {@code spreading}, {@code thermal}.
     */
    public static final String KEY_STRATEGY = "gpusched.yarn.strategy";
    /** How {@code CUDA_VISIBLE_DEVICES} names GPUs: {@code uuids} (default) or {@code indices}. */
    public static final String KEY_DEVICE_NAMING = "gpusched.yarn.device-naming";
    /**
     * Docker container runtime the container runs with; default {@code runc} (the device nodes and volumes are mounted
     * by this plugin); {@code nvidia} hands the devices to the NVIDIA runtime as well. It must be in
     * container-executor's {@code docker.allowed.runtimes}.
     */
    public static final String KEY_DOCKER_RUNTIME = "gpusched.yarn.docker.container-runtime";
    /**
     * Where the host's GPU device nodes live; default {@code /dev}. The paths reported to YARN (which checks each
     * node's type before fencing it) and the host side of Docker device mounts are under it; containers see them
     * under {@code /dev}.
     */
    public static final String KEY_DEV_ROOT = "gpusched.yarn.dev-root";
    /**
     * The node ledger's state directory, where each container's GPUs are recorded under its container id (see
     * {@link YarnContainerGpus}); default: the {@link io.gpusched.core.host.StateDirectory} rule, shared with every
     * other gpusched process of the node.
     */
    public static final String KEY_STATE_DIR = "gpusched.yarn.state-dir";
    /**
     * How often (milliseconds) the plugin counts the GPUs YARN can hand out (healthy, not held by other processes of
     * the node ledger) and, when the count changed, sets the node's capacity at the ResourceManager (see
     * {@link #getDevices()}, {@link CapacityFollower}); default {@value #DEFAULT_HEALTH_INTERVAL_MS}; {@code 0} turns
     * it off (capacity then changes only when the NodeManager restarts).
     */
    public static final String KEY_HEALTH_INTERVAL_MS = "gpusched.yarn.health-interval-ms";
    /** Default of {@link #KEY_HEALTH_INTERVAL_MS}. */
    public static final long DEFAULT_HEALTH_INTERVAL_MS = 5000;
    /**
     * How often (milliseconds) the plugin releases the node-ledger records of containers YARN has cleaned up (their
     * devices cgroup is gone; see {@link ContainerCgroups}) and writes the NodeManager's heartbeat
     * ({@link NodeManagerHeartbeat}); default {@value #DEFAULT_RECONCILE_INTERVAL_MS}; {@code 0} turns both off (a
     * finished container's record is then released only when YARN offers one of its GPUs again).
     */
    public static final String KEY_RECONCILE_INTERVAL_MS = "gpusched.yarn.reconcile-interval-ms";
    /** Default of {@link #KEY_RECONCILE_INTERVAL_MS}. */
    public static final long DEFAULT_RECONCILE_INTERVAL_MS = 5000;
    /**
     * How old (milliseconds) a container's record must be before it is released for a missing cgroup; default
     * {@value #DEFAULT_ENDED_GRACE_MS}. YARN makes a container's cgroup right after the plugin recorded its GPUs (in
     * the same {@code preStart}), so a young record may not have one yet.
     */
    public static final String KEY_ENDED_GRACE_MS = "gpusched.yarn.ended-grace-ms";
    /** Default of {@link #KEY_ENDED_GRACE_MS}. */
    public static final long DEFAULT_ENDED_GRACE_MS = 10_000;
    /**
     * The devices cgroup hierarchy where YARN makes one cgroup per container ({@code <devices mount>/<hierarchy>});
     * default: the one of the NodeManager's own cgroups handler (the LinuxContainerExecutor's). Set it only when the
     * plugin runs outside a NodeManager.
     */
    public static final String KEY_CONTAINER_CGROUPS = "gpusched.yarn.container-cgroups";
    /**
     * After how long without a running NodeManager (milliseconds) the records of its containers count as outliving
     * YARN: {@code gpusched status} and {@code doctor} then flag them with the command that releases them; default
     * {@code 600000} (10 minutes). It travels in the NodeManager's heartbeat ({@link NodeManagerHeartbeat}).
     */
    public static final String KEY_OUTLIVED_AFTER_MS = "gpusched.yarn.outlived-after-ms";
    /**
     * This NodeManager's node id at the ResourceManager ({@code host:port}), for capacity updates; default: the one
     * node the ResourceManager lists on this host (with the port of {@code yarn.nodemanager.address} when fixed).
     */
    public static final String KEY_NODE_ID = "gpusched.yarn.node-id";

    private static final Logger LOG = LoggerFactory.getLogger(GpuschedDevicePlugin.class);
    /** YARN's rule for resource type names (ResourceUtils in Hadoop 3.4): an optional DNS-like prefix, then a name. */
    private static final Pattern RESOURCE_NAME = Pattern.compile(
            "^(((\\p{Alnum}([\\p{Alnum}-]*\\p{Alnum})?\\.)*\\p{Alnum}([\\p{Alnum}-]*\\p{Alnum})?)/)?"
                    + "\\p{Alpha}([\\w.-]*)$");

    private Configuration conf = new Configuration(false);
    private GpuInventory inventory;
    private boolean ownsInventory;
    private volatile Node node;
    private volatile CapacityFollower capacity;

    /** Used by the NodeManager (through reflection) with {@link #setConf}. */
    public GpuschedDevicePlugin() {
    }

    /**
     * For hosts and tests that already hold an inventory.
     *
     * @param inventory the node's GPUs (not closed by this plugin)
     * @param conf      settings ({@code KEY_*}); {@link #KEY_INVENTORY} is ignored
     */
    public GpuschedDevicePlugin(GpuInventory inventory, Configuration conf) {
        this.inventory = Objects.requireNonNull(inventory, "inventory");
        this.conf = Objects.requireNonNull(conf, "conf");
    }

    @Override
    public synchronized void setConf(Configuration c) {
        this.conf = Objects.requireNonNull(c, "conf");
        if (capacity != null) {
            capacity.close();
            capacity = null;
        }
        if (node != null) {
            node.ledger.close();
        }
        if (ownsInventory && inventory != null) {
            inventory.close();
            inventory = null;
            ownsInventory = false;
        }
        this.node = null;
    }

    @Override
    public synchronized Configuration getConf() {
        return conf;
    }

    @Override
    public DeviceRegisterRequest getRegisterRequestInfo() {
        return DeviceRegisterRequest.Builder.newInstance().setResourceName(resourceName())
                .setPluginVersion(GpuschedDevicePlugin.class.getPackage().getImplementationVersion() == null ? "dev"
                        : GpuschedDevicePlugin.class.getPackage().getImplementationVersion())
                .build();
    }

    /** @return the resource name this plugin registers */
    public String resourceName() {
        String n = getConf().getTrimmed(KEY_RESOURCE_NAME, DEFAULT_RESOURCE_NAME);
        if (n.isEmpty()) {
            throw new IllegalArgumentException(KEY_RESOURCE_NAME + " is empty; expected a resource type name such as "
                    + DEFAULT_RESOURCE_NAME);
        }
        if (!RESOURCE_NAME.matcher(n).matches()) {
            throw new IllegalArgumentException(KEY_RESOURCE_NAME + " = \"" + n + "\" is not a YARN resource type name;"
                    + " expected [vendor-domain/]name, letters, digits, '-', '_' and '.', such as "
                    + DEFAULT_RESOURCE_NAME);
        }
        return n;
    }

    /**
     * Reports the GPUs that can be handed out now: healthy ones, with device numbers and bus id. YARN 3.4 sets the
     * node's capacity from the size of this set and never reads {@link Device#isHealthy()}, so an unhealthy GPU is
     * left out (and logged) rather than reported unhealthy. YARN calls this only while the NodeManager starts (for
     * its capacity and for the device handler's books); afterwards, when a reported GPU turns unhealthy or comes
     * back, or another process of the node ledger takes or gives back GPUs, the plugin sets the node's capacity at the
     * ResourceManager itself (every {@link #KEY_HEALTH_INTERVAL_MS}; see {@link CapacityFollower}). A GPU unhealthy at
     * start is not in YARN's books and comes back only with a NodeManager restart.
     *
     * @return the healthy GPUs of the node
     */
    @Override
    public Set<Device> getDevices() {
        Node n = node();
        Set<Device> out = new TreeSet<>();
        List<String> left = new ArrayList<>();
        for (GpuDevice d : n.inventory.devices()) {
            GpuHealth h = n.inventory.health(d);
            if (!h.isHealthy()) {
                left.add("GPU " + d.index() + " " + d.uuid() + " (" + h + ")");
                continue;
            }
            out.add(Device.Builder.newInstance()
                    .setId(d.index())
                    .setDevPath(devPath(d, n.devRoot))
                    .setMajorNumber(major(d))
                    .setMinorNumber(minorOf(d))
                    .setBusID(d.pciBusId())
                    .setHealthy(true)
                    .setStatus("healthy")
                    .build());
        }
        if (!left.isEmpty()) {
            LOG.warn("gpusched: {} of {} GPUs are not reported to YARN (not healthy): {}", left.size(),
                    n.inventory.devices().size(), left);
        }
        startCapacityFollower(n, out);
        return out;
    }

    private synchronized void startCapacityFollower(Node n, Set<Device> reported) {
        long ms = millis(KEY_HEALTH_INTERVAL_MS, DEFAULT_HEALTH_INTERVAL_MS, "0 turns capacity updates off");
        long every = millis(KEY_RECONCILE_INTERVAL_MS, DEFAULT_RECONCILE_INTERVAL_MS, "0 turns the release of ended"
                + " containers' records and the NodeManager's heartbeat off");
        long grace = millis(KEY_ENDED_GRACE_MS, DEFAULT_ENDED_GRACE_MS, "0 releases a record as soon as its cgroup"
                + " is not there");
        long outlived = millis(KEY_OUTLIVED_AFTER_MS, NodeManagerHeartbeat.DEFAULT_OUTLIVED_AFTER.toMillis(),
                "how long without a NodeManager before its containers' records are flagged");
        List<GpuDevice> registered = new ArrayList<>();
        for (Device dev : reported) {
            GpuDevice d = n.lookup(dev);
            if (d != null) {
                registered.add(d);
            }
        }
        if (capacity != null) {
            capacity.registered(registered);
            return;
        }
        if (every == 0) {
            // no reconcile, but the heartbeat still says which NodeManager runs (by pid and start time), so status
            // and doctor never call a running NodeManager's containers outlived
            try {
                NodeManagerHeartbeat.write(n.ledger.stateDirectory(), Duration.ZERO, Duration.ofMillis(outlived));
            } catch (IOException | RuntimeException e) {
                LOG.warn("gpusched: writing the NodeManager's heartbeat failed: {}", e.toString());
            }
        }
        if (ms == 0 && every == 0) {
            return;
        }
        capacity = new CapacityFollower(getConf(), resourceName(), n.inventory, registered, Duration.ofMillis(ms),
                new CapacityFollower.Reconcile(n.ledger, ContainerCgroups.of(getConf()), Duration.ofMillis(every),
                        Duration.ofMillis(grace), Duration.ofMillis(outlived)));
        capacity.start();
    }

    private long millis(String key, long dflt, String zero) {
        long v;
        try {
            v = getConf().getLong(key, dflt);
        } catch (NumberFormatException e) {
            v = -1;
        }
        if (v < 0) {
            throw new IllegalArgumentException(key + " = " + getConf().get(key) + "; expected milliseconds >= 0 ("
                    + zero + ")");
        }
        return v;
    }

    /** @return the capacity follower started by the first {@link #getDevices()}, if any */
    CapacityFollower capacityFollower() {
        return capacity;
    }

    /**
     * Chooses {@code count} of the devices YARN offers. GPUs the inventory reports unhealthy now, and GPUs other
     * processes hold in the node ledger, are left out of the offer; the strategy sees the rest of the node as busy.
     * The choice is recorded in the node ledger under the container id before it is returned; the records of finished
     * containers (one of their GPUs is offered again) are released in the same transaction: at most one forced
     * append per call.
     *
     * @return the chosen devices (elements of {@code availableDevices}), or an empty set when the healthy offer is too
     *         small; the framework then fails the container, and the reason is logged
     */
    @Override
    public Set<Device> allocateDevices(Set<Device> availableDevices, int count, Map<String, String> env) {
        Node n = node();
        Set<Device> out = new TreeSet<>();
        if (count <= 0) {
            return out;
        }
        Set<Integer> suspect = Set.of();
        for (int attempt = 1;; attempt++) {
            Offer offer = n.offer(availableDevices);
            List<String> finished = n.ledger.reconcile(offer);
            for (int i : suspect) {
                if (offer.contains(i)) {
                    offer.remove(i, "GPU " + i + " (a finished container's, refused in this call's pick: it may still"
                            + " be draining)");
                }
            }
            int[] chosen = decide(n, offer, count, availableDevices.size());
            if (chosen == null) {
                n.ledger.releaseFinished(finished);
                return out;
            }
            boolean last = attempt == RECORD_TRIES;
            if (n.ledger.record(finished, chosen, env, last)) {
                for (int i : chosen) {
                    out.add(offer.device(i));
                }
                return out;
            }
            if (last) {
                return out;
            }
            // refused, nothing written: another process took a GPU of the pick after the ledger read (the next
            // reconcile sees it), or a finished container's GPU in the pick drains once released (left out next);
            // the finished records stay for the next try's transaction, so a call still forces at most once
            suspect = n.ledger.devicesOf(finished, chosen);
        }
    }

    /** How often a pick the node ledger refuses (another process took one of its GPUs meanwhile) is decided again. */
    static final int RECORD_TRIES = 3;

    /**
     * The placement decision alone, with no ledger read or write: what Hadoop's own plug-in does per call (for the
     * benchmark that compares the two; {@link #allocateDevices} is this plus the node ledger).
     *
     * @return the devices chosen among the healthy offered ones, or an empty set
     */
    Set<Device> decideOnly(Set<Device> availableDevices, int count) {
        Node n = node();
        Set<Device> out = new TreeSet<>();
        if (count <= 0) {
            return out;
        }
        Offer offer = n.offer(availableDevices);
        int[] chosen = decide(n, offer, count, availableDevices.size());
        if (chosen != null) {
            for (int i : chosen) {
                out.add(offer.device(i));
            }
        }
        return out;
    }

    /** @return the strategy's (cached) choice among the offer's GPUs, or null (logged) when it declines */
    int[] decide(Node n, Offer offer, int count, int askedOf) {
        if (offer.size() < count) {
            LOG.warn("gpusched: cannot place {} {}: YARN offers {} device(s), {} healthy and known; left out: {}",
                    count, resourceName(), askedOf, offer.size(), offer.refused());
            return null;
        }
        AllocationStrategy s = n.strategy;
        int[] chosen = n.placements.choose(offer.bits(), count, () -> {
            GpuRequest request = GpuRequest.builder().count(count).owner("yarn").build();
            List<Integer> got = s.select(request, new OfferView(n, offer));
            int[] a = new int[got.size()];
            for (int i = 0; i < a.length; i++) {
                a[i] = got.get(i);
            }
            return a;
        });
        if (!valid(chosen, offer, count)) {
            LOG.warn("gpusched: strategy {} returned {} for {} of offered {}; declining", s.name(),
                    Arrays.toString(chosen), count, offer.indices());
            return null;
        }
        return chosen;
    }

    /** @return whether {@code chosen} is {@code count} distinct offered GPUs */
    private static boolean valid(int[] chosen, Offer offer, int count) {
        if (chosen.length != count) {
            return false;
        }
        for (int i = 0; i < chosen.length; i++) {
            if (!offer.contains(chosen[i])) {
                return false;
            }
            for (int j = 0; j < i; j++) {
                if (chosen[j] == chosen[i]) {
                    return false;
                }
            }
        }
        return true;
    }

    /**
     * @return for the Docker runtime: the job environment, the GPUs' device nodes plus the vendor's control nodes, the
     *         CUDA installation's read-only volumes and the configured container runtime; for the default runtime
     *         the environment alone
     * @throws IllegalArgumentException for a device this node's inventory does not know
     */
    @Override
    public DeviceRuntimeSpec onDevicesAllocated(Set<Device> allocatedDevices, YarnRuntimeType yarnRuntime) {
        Node n = node();
        List<GpuDevice> gpus = new ArrayList<>();
        for (Device dev : allocatedDevices) {
            GpuDevice d = n.lookup(dev);
            if (d == null) {
                throw new IllegalArgumentException("device " + dev + " is not on this node's inventory "
                        + n.inventory.backend() + "; known: " + n.inventory.devices().stream()
                                .map(g -> devPath(g, n.devRoot)).toList());
            }
            gpus.add(d);
        }
        gpus.sort((a, b) -> Integer.compare(a.index(), b.index()));
        Allocation a = new Allocation("yarn-" + String.join("-", gpus.stream().map(g -> "" + g.index()).toList()),
                gpus, GpuRequest.builder().count(Math.max(1, gpus.size())).owner("yarn").build(), Instant.now());
        CudaEnvironment ce = gpus.isEmpty() ? null : n.cuda.resolve(a, CudaRequirement.NONE);
        DeviceRuntimeSpec.Builder b = DeviceRuntimeSpec.Builder.newInstance();
        if (ce != null) {
            YarnContainerGpus.environment(ce).forEach(b::addEnv);
        }
        if (yarnRuntime == YarnRuntimeType.RUNTIME_DOCKER) {
            String runtime = getConf().getTrimmed(KEY_DOCKER_RUNTIME, "runc");
            if (runtime.isEmpty()) {
                throw new IllegalArgumentException(KEY_DOCKER_RUNTIME + " is empty; expected a Docker runtime name"
                        + " such as runc or nvidia");
            }
            b.setContainerRuntime(runtime);
            for (String path : deviceNodes(gpus, n.inventory.devices(), n.devRoot)) {
                b.addMountDeviceSpec(MountDeviceSpec.Builder.newInstance()
                        .setDevicePathInHost(n.devRoot.resolve(path.substring("/dev/".length())).toString())
                        .setDevicePathInContainer(path).setDevicePermission(MountDeviceSpec.RW).build());
            }
            if (ce != null) {
                for (CudaEnvironment.Mount m : ce.mounts()) {
                    b.addMountVolumeSpec(MountVolumeSpec.Builder.newInstance().setHostPath(m.source().toString())
                            .setMountPath(m.target().toString()).setReadOnly(Boolean.TRUE).build());
                }
            }
        }
        return b.build();
    }

    /** Nothing to undo: the framework keeps the books of which container holds which device. */
    @Override
    public void onDevicesReleased(Set<Device> releasedDevices) {
        LOG.debug("gpusched: released {}", releasedDevices);
    }

    /** @return the inventory this plugin serves (opened on first use from {@link #KEY_INVENTORY}) */
    public GpuInventory inventory() {
        return node().inventory;
    }

    /** Stops the capacity follower, closes the node ledger and the inventory if this plugin opened it. */
    public synchronized void close() {
        if (capacity != null) {
            capacity.close();
            capacity = null;
        }
        if (node != null) {
            node.ledger.close();
        }
        if (ownsInventory && inventory != null) {
            inventory.close();
            inventory = null;
        }
        node = null;
    }

    /**
     * @return the GPUs' own nodes (MIG caps, DRM card nodes included), then the vendor's control nodes that exist
     *         under {@code devRoot}, as container paths under {@code /dev}, from gpu-core's device-node table
     */
    static List<String> deviceNodes(List<GpuDevice> gpus, List<GpuDevice> host, Path devRoot) {
        GpuDeviceNodes table = new GpuDeviceNodes(devRoot, Path.of("/proc"), true);
        var plan = table.plan("YARN container GPUs " + gpus.stream().map(g -> "" + g.index()).toList(), gpus, host);
        List<String> out = new ArrayList<>();
        for (DeviceNode d : plan.gpuNodes()) {
            out.add("/dev/" + devRoot.relativize(d.path()));
        }
        for (DeviceNode d : plan.controlNodes()) {
            if (Files.exists(d.path())) {
                out.add("/dev/" + devRoot.relativize(d.path()));
            }
        }
        return out;
    }

    static String devPath(GpuDevice d, Path devRoot) {
        return devRoot.resolve(d.vendor() == GpuVendor.AMD ? "dri/renderD" + minorOf(d)
                : "nvidia" + minorOf(d)).toString();
    }

    static int major(GpuDevice d) {
        return d.vendor() == GpuVendor.AMD ? GpuDeviceNodes.DRM_MAJOR : GpuDeviceNodes.NVIDIA_MAJOR;
    }

    static int minorOf(GpuDevice d) {
        return d.minor().orElse(d.index());
    }

    /** @return this configuration's node (opened on first use) */
    Node node() {
        Node n = node;
        if (n != null) {
            return n;
        }
        synchronized (this) {
            if (node == null) {
                if (inventory == null) {
                    inventory = openInventory(getConf().getTrimmed(KEY_INVENTORY, "auto"));
                    ownsInventory = true;
                }
                node = new Node(inventory, getConf());
            }
            return node;
        }
    }

    private static GpuInventory openInventory(String spec) {
        try {
            return InventorySpec.parse(spec).open(GpuConfig.defaults());
        } catch (RuntimeException e) {
            throw new IllegalArgumentException(KEY_INVENTORY + " = \"" + spec + "\": " + e.getMessage()
                    + "; expected auto, simulated:<profile or YAML path> (profiles: "
                    + GpuInventories.simulatedProfiles() + ") or provider names such as nvml", e);
        }
    }

    /** What one configuration of the plugin has worked out once: lookups, strategy, CUDA resolver. */
    static final class Node {
        final GpuInventory inventory;
        final Map<Integer, GpuDevice> byMinor = new HashMap<>();
        final Map<String, GpuDevice> byBus = new HashMap<>();
        /** One more than the largest device index (the size of an {@link Offer}). */
        final int indices;
        final AllocationStrategy strategy;
        /** The strategy's answers per offered set and count (issue 23: as fast as Hadoop's table). */
        final PlacementCache placements = new PlacementCache(4_096);
        final CudaEnvironmentResolver cuda;
        final Path devRoot;
        final ContainerLedger ledger;

        Node(GpuInventory inventory, Configuration conf) {
            this.inventory = inventory;
            int top = 0;
            for (GpuDevice d : inventory.devices()) {
                byMinor.putIfAbsent(minorOf(d), d);
                byBus.putIfAbsent(d.pciBusId().toLowerCase(Locale.ROOT), d);
                top = Math.max(top, d.index() + 1);
            }
            this.indices = top;
            String s = conf.getTrimmed(KEY_STRATEGY, "topology");
            try {
                this.strategy = AllocationStrategies.fromConfig(GpuConfig.defaults().withStrategy(s));
            } catch (RuntimeException e) {
                throw new IllegalArgumentException(KEY_STRATEGY + " = \"" + s + "\": " + e.getMessage(), e);
            }
            String naming = conf.getTrimmed(KEY_DEVICE_NAMING, "uuids").toLowerCase(Locale.ROOT);
            CudaEnvironmentResolver.DeviceNaming dn = switch (naming) {
                case "uuids" -> CudaEnvironmentResolver.DeviceNaming.UUIDS;
                case "indices" -> CudaEnvironmentResolver.DeviceNaming.INDICES;
                default -> throw new IllegalArgumentException(KEY_DEVICE_NAMING + " = \"" + naming
                        + "\"; expected \"uuids\" or \"indices\"");
            };
            this.cuda = CudaEnvironmentResolver.builder().deviceNaming(dn).build();
            this.devRoot = Path.of(conf.getTrimmed(KEY_DEV_ROOT, "/dev"));
            String dir = conf.getTrimmed(KEY_STATE_DIR, "");
            this.ledger = new ContainerLedger(inventory, dir.isEmpty() ? Optional.empty() : Optional.of(Path.of(dir)));
        }

        /**
         * @return the offered devices this node knows and finds healthy now, by GPU index; the others are noted as
         *         left out
         */
        Offer offer(Set<Device> availableDevices) {
            Offer o = new Offer(indices);
            for (Device dev : availableDevices) {
                GpuDevice d = lookup(dev);
                if (d == null) {
                    o.refuse(dev.getDevPath() + " (not on this node's inventory " + inventory.backend() + ")");
                    continue;
                }
                GpuHealth h = inventory.health(d);
                if (!h.isHealthy()) {
                    o.refuse("GPU " + d.index() + " " + d.uuid() + " (" + h + ")");
                    continue;
                }
                o.add(d.index(), dev);
            }
            return o;
        }

        /** @return the inventory device behind a YARN device: by minor number, else by bus id; null if unknown */
        GpuDevice lookup(Device dev) {
            GpuDevice d = byMinor.get(dev.getMinorNumber());
            if (d != null && (dev.getBusID() == null || dev.getBusID().isEmpty()
                    || dev.getBusID().equalsIgnoreCase(d.pciBusId()))) {
                return d;
            }
            return dev.getBusID() == null ? null : byBus.get(dev.getBusID().toLowerCase(Locale.ROOT));
        }
    }

    /** The node as a strategy sees it for one YARN offer: offered healthy GPUs are free, everything else is busy. */
    private static final class OfferView implements SchedulingView {
        private final List<DeviceState> devices;
        private final List<DeviceState> candidates;
        private final GpuTopology topology;

        OfferView(Node n, Offer offered) {
            List<DeviceState> all = new ArrayList<>();
            List<DeviceState> cands = new ArrayList<>();
            for (GpuDevice d : n.inventory.devices()) {
                DeviceState s;
                if (offered.contains(d.index())) {
                    s = DeviceState.idle(d, GpuHealth.HEALTHY);
                    cands.add(s);
                } else {
                    s = new DeviceState(d, n.inventory.health(d), Optional.of("yarn"), 0, MemorySize.ZERO,
                            Optional.empty(), DeviceState.Pool.IN_POOL, Optional.empty(), Optional.empty());
                }
                all.add(s);
            }
            this.devices = List.copyOf(all);
            this.candidates = List.copyOf(cands);
            this.topology = n.inventory.topology();
        }

        @Override
        public List<DeviceState> devices() {
            return devices;
        }

        @Override
        public List<DeviceState> candidates() {
            return candidates;
        }

        @Override
        public DeviceState device(int index) {
            for (DeviceState s : devices) {
                if (s.index() == index) {
                    return s;
                }
            }
            throw new IllegalArgumentException("no device " + index + " on this node");
        }

        @Override
        public GpuTopology topology() {
            return topology;
        }

        @Override
        public Instant now() {
            return Instant.now();
        }
    }
}
