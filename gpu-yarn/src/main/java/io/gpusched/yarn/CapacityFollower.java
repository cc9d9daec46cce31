package io.gpusched.yarn;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuHealthListener;
import io.gpusched.core.GpuInventory;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.time.Duration;
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
 * Keeps the node's GPU capacity at the ResourceManager equal to the number of GPUs that can be handed out. In Hadoop
 * 3.4 a NodeManager reads a device plugin's {@code getDevices()} only while it starts (NodeStatusUpdaterImpl's
 * {@code updateConfiguredResource} for the capacity it registers with, DeviceResourceHandlerImpl's
 * {@code bootstrap} for the devices it hands out); heartbeats never carry the node's resources again, and the only
 * way to change them at run time is the ResourceManager's {@code updateNodeResource} (what {@code yarn rmadmin
 * -updateNodeResource} calls), whose new value reaches the NodeManager in its next heartbeat response. So this
 * follower watches the health of the GPUs the NodeManager registered (health listener plus a poll every interval)
 * and, when the count of healthy ones changes, calls {@code updateNodeResource} with the node's current capacity
 * and the new GPU count (no overcommit timeout: running containers are never preempted). It needs the
 * ResourceManager's admin ACL ({@code yarn.admin.acl}, {@code *} by default) for the NodeManager's user. A failed
 * update is logged and tried again on the next tick. Its two RPC proxies (client and admin protocol) are kept while
 * it runs, and opened again only after a failure: while GPUs are missing it reads the ResourceManager every tick.
 */
final class CapacityFollower implements AutoCloseable, GpuHealthListener {
    private static final Logger LOG = LoggerFactory.getLogger(CapacityFollower.class);

    private final Configuration conf;
    private final String resourceName;
    private final GpuInventory inventory;
    private final Duration interval;
    private final Object lock = new Object();
    private List<GpuDevice> registered;
    private long atRm;
    private boolean dirty;
    private boolean closed;
    private Thread thread;
    private volatile long updates;
    private volatile long polls;
    private volatile long proxiesOpened;
    /** Kept across ticks (each new proxy is a connection and two INFO lines in the NodeManager's log). */
    private ApplicationClientProtocol client;
    private ResourceManagerAdministrationProtocol admin;

    CapacityFollower(Configuration conf, String resourceName, GpuInventory inventory, List<GpuDevice> registered,
            Duration interval) {
        this.conf = new Configuration(conf);
        this.resourceName = resourceName;
        this.inventory = inventory;
        this.registered = List.copyOf(registered);
        this.atRm = registered.size();
        this.interval = interval;
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
        inventory.addHealthListener(this);
        thread = new Thread(this::run, "gpusched-yarn-capacity");
        thread.setDaemon(true);
        thread.start();
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

    @Override
    public void onHealthChange(GpuDevice device, GpuHealth health) {
        synchronized (lock) {
            dirty = true;
            lock.notifyAll();
        }
    }

    /** @return the GPUs YARN can hand out: registered with the NodeManager and healthy now */
    int usable() {
        List<GpuDevice> reg;
        synchronized (lock) {
            reg = registered;
        }
        int n = 0;
        for (GpuDevice d : reg) {
            if (inventory.health(d).isHealthy()) {
                n++;
            }
        }
        return n;
    }

    private void run() {
        try {
            follow();
        } finally {
            stopProxies();
        }
    }

    private void follow() {
        while (true) {
            synchronized (lock) {
                if (closed) {
                    return;
                }
                if (!dirty) {
                    try {
                        lock.wait(interval.toMillis());
                    } catch (InterruptedException e) {
                        return;
                    }
                }
                if (closed) {
                    return;
                }
                dirty = false;
            }
            int want = usable();
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
        LOG.info("gpusched: node {} now offers {} = {} (was {}): healthy GPUs of those registered", mine.getNodeId(),
                resourceName, count, before);
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
        inventory.removeHealthListener(this);
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
