package io.gpusched.yarn;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuHealthListener;
import io.gpusched.core.GpuInventory;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.ipc.RPC;
import org.apache.hadoop.yarn.api.ApplicationClientProtocol;
import org.apache.hadoop.yarn.api.protocolrecords.GetClusterNodesRequest;
import org.apache.hadoop.yarn.api.records.NodeId;
import org.apache.hadoop.yarn.api.records.NodeReport;
import org.apache.hadoop.yarn.api.records.NodeState;
import org.apache.hadoop.yarn.api.records.Resource;
import org.apache.hadoop.yarn.api.records.ResourceOption;
import org.apache.hadoop.yarn.client.ClientRMProxy;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.api.ResourceManagerAdministrationProtocol;
import org.apache.hadoop.yarn.server.api.protocolrecords.UpdateNodeResourceRequest;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The plug-in's follower thread: it keeps the node's GPU capacity at the ResourceManager equal to the number of GPUs
 * that can be handed out, releases the node-ledger records of containers YARN has cleaned up, and writes the
 * NodeManager's heartbeat ({@link NodeManagerHeartbeat}). One thread, one RPC connection (two proxies) kept while it
 * runs.
 *
 * <p><b>Capacity.</b> In Hadoop 3.4 a NodeManager reads a device plugin's {@code getDevices()} only while it starts
 * (NodeStatusUpdaterImpl's {@code updateConfiguredResource} for the capacity it registers with,
 * DeviceResourceHandlerImpl's {@code bootstrap} for the devices it hands out); heartbeats never carry the node's
 * resources again, and the only way to change them at run time is the ResourceManager's {@code updateNodeResource}
 * (what {@code yarn rmadmin -updateNodeResource} calls), whose new value reaches the NodeManager in its next heartbeat
 * response. So every tick (and at once on a health change) the follower counts the registered GPUs YARN can hand out:
 * healthy, not held in the node ledger by another process (the CLI, Spark, Flink, the service: what the plug-in's
 * {@code allocateDevices} leaves out of YARN's offer), in the pool or held by a YARN container ({@link
 * ContainerLedger#handOut}); YARN's own containers' records are not "others", they are what YARN sold. When the count
 * differs from the ResourceManager's, it calls {@code updateNodeResource} with the node's current capacity and the
 * new GPU count (no overcommit timeout: running containers are never preempted). The count is read from the ledger
 * after the other process's allocation is committed, so capacity goes down after the other process took its GPUs
 * (never before), within one tick; a container the ResourceManager places in that tick finds the GPUs gone and fails,
 * as it would without the follower. It needs the ResourceManager's admin ACL ({@code yarn.admin.acl}, {@code *} by
 * default) for the NodeManager's user. A failed update is logged and tried again on the next tick; while GPUs are
 * missing it reads the ResourceManager every tick (a re-registration brings back the start-time count).
 *
 * <p><b>Ended containers.</b> Every {@link GpuschedDevicePlugin#KEY_RECONCILE_INTERVAL_MS} it releases the records of
 * containers whose devices cgroup YARN has removed ({@link ContainerLedger#releaseEnded}), in one forced append, so a
 * finished container's GPUs come back whether or not YARN allocates again; then it writes the heartbeat.
 */
final class CapacityFollower implements AutoCloseable, GpuHealthListener {
    private static final Logger LOG = LoggerFactory.getLogger(CapacityFollower.class);

    /** What the follower does besides capacity, and how often. */
    record Reconcile(ContainerLedger ledger, ContainerCgroups cgroups, Duration every, Duration grace,
            Duration outlivedAfter) {
    }

    private final Configuration conf;
    private final String resourceName;
    private final GpuInventory inventory;
    /** Zero: capacity is not followed. */
    private final Duration interval;
    private final Reconcile reconcile;
    private final Object lock = new Object();
    private List<GpuDevice> registered;
    private long atRm;
    private boolean dirty;
    private boolean closed;
    private Thread thread;
    private volatile long updates;
    private volatile long polls;
    private volatile long proxiesOpened;
    private volatile long reconciles;
    private volatile long released;
    private String lastFailure;
    /** Kept across ticks (each new proxy is a connection and two INFO lines in the NodeManager's log). */
    private ApplicationClientProtocol client;
    private ResourceManagerAdministrationProtocol admin;

    /**
     * @param interval  how often capacity is checked; zero: not followed
     * @param reconcile the ledger work; its {@code every} zero: none
     */
    CapacityFollower(Configuration conf, String resourceName, GpuInventory inventory, List<GpuDevice> registered,
            Duration interval, Reconcile reconcile) {
        this.conf = new Configuration(conf);
        this.resourceName = resourceName;
        this.inventory = inventory;
        this.registered = List.copyOf(registered);
        this.atRm = registered.size();
        this.interval = interval;
        this.reconcile = reconcile;
    }

    /** The NodeManager asked for the devices again (it registers with the RM with that many). */
    void registered(List<GpuDevice> devices) {
        synchronized (lock) {
            registered = List.copyOf(devices);
            atRm = devices.size();
            dirty = true;
            lock.notifyAll();
        }
    }

    void start() {
        if (following()) {
            inventory.addHealthListener(this);
        }
        thread = new Thread(this::run, "gpusched-yarn-follower");
        thread.setDaemon(true);
        thread.start();
    }

    private boolean following() {
        return !interval.isZero() && !interval.isNegative();
    }

    private boolean reconciling() {
        return !reconcile.every().isZero() && !reconcile.every().isNegative();
    }

    /** @return how many capacity updates changed the ResourceManager's value */
    long updates() {
        return updates;
    }

    /** @return how often the ResourceManager's value was read */
    long polls() {
        return polls;
    }

    /** @return how many RPC proxies to the ResourceManager were opened */
    long proxiesOpened() {
        return proxiesOpened;
    }

    /** @return how many reconciles ran to their end */
    long reconciles() {
        return reconciles;
    }

    /** @return how many records of ended containers this follower released */
    long released() {
        return released;
    }

    @Override
    public void onHealthChange(GpuDevice device, GpuHealth health) {
        synchronized (lock) {
            dirty = true;
            lock.notifyAll();
        }
    }

    /** @return the GPUs YARN can hand out: registered with the NodeManager, healthy, not held by other processes */
    int usable() {
        List<GpuDevice> reg;
        synchronized (lock) {
            reg = registered;
        }
        return reconcile.ledger().handOut(reg, inventory);
    }

    private void run() {
        try {
            follow();
        } finally {
            stopProxies();
        }
    }

    private void follow() {
        long tick = Math.min(following() ? interval.toMillis() : Long.MAX_VALUE,
                reconciling() ? reconcile.every().toMillis() : Long.MAX_VALUE);
        long nextReconcile = System.nanoTime();
        boolean first = true;
        while (true) {
            synchronized (lock) {
                if (!first && !dirty) {
                    try {
                        lock.wait(Math.max(1, tick));
                    } catch (InterruptedException e) {
                        return;
                    }
                }
                first = false;
                if (closed) {
                    return;
                }
                dirty = false;
            }
            if (reconciling() && System.nanoTime() - nextReconcile >= 0) {
                reconcileOnce();
                nextReconcile = System.nanoTime() + reconcile.every().toNanos();
            }
            if (following()) {
                followCapacity();
            }
        }
    }

    /** Releases ended containers' records (one forced append), then writes the heartbeat; failures are logged. */
    void reconcileOnce() {
        try {
            released += reconcile.ledger().releaseEnded(reconcile.cgroups(), Instant.now(), reconcile.grace()).size();
            NodeManagerHeartbeat.write(reconcile.ledger().stateDirectory(), reconcile.every(),
                    reconcile.outlivedAfter());
            reconciles++;
            lastFailure = null;
        } catch (IOException | RuntimeException e) {
            String why = e.toString();
            if (!why.equals(lastFailure)) { // once per distinct failure, not every tick
                lastFailure = why;
                LOG.warn("gpusched: reconciling the node ledger's container records failed (tried again in {} ms):"
                        + " {}", reconcile.every().toMillis(), why);
            }
        }
    }

    private void followCapacity() {
        int want;
        try {
            want = usable();
        } catch (RuntimeException e) { // the ledger cannot be read now: keep the ResourceManager's value
            LOG.warn("gpusched: cannot count the GPUs YARN can hand out (tried again in {} ms): {}",
                    interval.toMillis(), e.toString());
            return;
        }
        long have;
        int all;
        synchronized (lock) {
            have = atRm;
            all = registered.size();
        }
        // a changed count is set; while GPUs are missing, the ResourceManager's value is checked every tick, as a
        // re-registration (ResourceManager restart) brings back the count the NodeManager started with
        if (want != have || want != all) {
            try {
                if (push(want)) {
                    updates++;
                }
                synchronized (lock) {
                    atRm = want;
                }
            } catch (Exception e) {
                stopProxies();
                LOG.warn("gpusched: could not set {} = {} for this node at the ResourceManager (tried again in {}"
                        + " ms): {}", resourceName, want, interval.toMillis(), e.toString());
            }
        }
    }

    /** @return whether the ResourceManager's value differed and was set */
    private boolean push(int count) throws Exception {
        if (client == null || admin == null) {
            stopProxies();
            YarnConfiguration yc = new YarnConfiguration(conf);
            client = ClientRMProxy.createRMProxy(yc, ApplicationClientProtocol.class);
            admin = ClientRMProxy.createRMProxy(yc, ResourceManagerAdministrationProtocol.class);
            proxiesOpened += 2;
        }
        polls++;
        NodeReport mine = myNode(client.getClusterNodes(GetClusterNodesRequest.newInstance(
                EnumSet.of(NodeState.RUNNING, NodeState.UNHEALTHY, NodeState.NEW))).getNodeReports());
        Resource cap = Resource.newInstance(mine.getCapability());
        long before = cap.getResourceValue(resourceName);
        if (before == count) {
            return false;
        }
        cap.setResourceValue(resourceName, count);
        admin.updateNodeResource(UpdateNodeResourceRequest.newInstance(
                Map.of(mine.getNodeId(), ResourceOption.newInstance(cap, -1))));
        LOG.info("gpusched: node {} now offers {} = {} (was {}): the registered GPUs that are healthy and not held by"
                + " other processes of the node ledger", mine.getNodeId(), resourceName, count, before);
        return true;
    }

    private void stopProxies() {
        if (client != null) {
            RPC.stopProxy(client);
            client = null;
        }
        if (admin != null) {
            RPC.stopProxy(admin);
            admin = null;
        }
    }

    /**
     * @return this NodeManager's node among the ResourceManager's, by {@link GpuschedDevicePlugin#KEY_NODE_ID} or host
     */
    NodeReport myNode(List<NodeReport> nodes) throws Exception {
        String given = conf.getTrimmed(GpuschedDevicePlugin.KEY_NODE_ID, "");
        if (!given.isEmpty()) {
            for (NodeReport r : nodes) {
                if (r.getNodeId().toString().equals(given)) {
                    return r;
                }
            }
            throw new IllegalStateException(GpuschedDevicePlugin.KEY_NODE_ID + " = " + given
                    + " is not a node of the ResourceManager; it lists " + ids(nodes));
        }
        Set<String> names = new LinkedHashSet<>();
        InetAddress local = InetAddress.getLocalHost();
        names.add(local.getHostName());
        names.add(local.getCanonicalHostName());
        names.add(local.getHostAddress());
        String nmHost = conf.getTrimmed(YarnConfiguration.NM_PREFIX + "hostname", "");
        if (!nmHost.isEmpty() && !nmHost.equals("0.0.0.0")) {
            names.add(nmHost);
        }
        InetSocketAddress nm = conf.getSocketAddr(YarnConfiguration.NM_ADDRESS, YarnConfiguration.DEFAULT_NM_ADDRESS,
                YarnConfiguration.DEFAULT_NM_PORT);
        List<NodeReport> here = new ArrayList<>();
        for (NodeReport r : nodes) {
            NodeId id = r.getNodeId();
            if (names.contains(id.getHost()) && (nm.getPort() == 0 || nm.getPort() == id.getPort())) {
                here.add(r);
            }
        }
        if (here.size() != 1) {
            throw new IllegalStateException((here.isEmpty() ? "no" : here.size()) + " nodes of the ResourceManager"
                    + " match this host " + names + (nm.getPort() == 0 ? "" : " port " + nm.getPort())
                    + " (it lists " + ids(nodes) + "); set " + GpuschedDevicePlugin.KEY_NODE_ID
                    + " or a fixed port in " + YarnConfiguration.NM_ADDRESS);
        }
        return here.get(0);
    }

    private static List<String> ids(List<NodeReport> nodes) {
        return nodes.stream().map(r -> r.getNodeId().toString()).toList();
    }

    @Override
    public void close() {
        if (following()) {
            inventory.removeHealthListener(this);
        }
        synchronized (lock) {
            closed = true;
            lock.notifyAll();
        }
        if (thread != null && thread != Thread.currentThread()) {
            try {
                thread.join(2000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
