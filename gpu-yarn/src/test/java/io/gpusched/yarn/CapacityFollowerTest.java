package io.gpusched.yarn;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.host.GpuNode;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.testing.Jdk;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Path;
import java.time.Duration;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import org.apache.hadoop.ipc.RPC;
import org.apache.hadoop.yarn.api.ApplicationClientProtocol;
import org.apache.hadoop.yarn.api.protocolrecords.GetClusterNodesRequest;
import org.apache.hadoop.yarn.api.records.NodeId;
import org.apache.hadoop.yarn.api.records.NodeReport;
import org.apache.hadoop.yarn.api.records.NodeState;
import org.apache.hadoop.yarn.api.records.Resource;
import org.apache.hadoop.yarn.client.ClientRMProxy;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.api.ResourceTracker;
import org.apache.hadoop.yarn.server.api.ServerRMProxy;
import org.apache.hadoop.yarn.server.api.protocolrecords.RegisterNodeManagerRequest;
import org.apache.hadoop.yarn.server.api.protocolrecords.UnRegisterNodeManagerRequest;
import org.apache.hadoop.yarn.server.nodemanager.api.deviceplugin.Device;
import org.apache.hadoop.yarn.server.resourcemanager.ResourceManager;
import org.apache.hadoop.yarn.util.resource.ResourceUtils;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Capacity follows health against a real ResourceManager (Hadoop 3.4.2, in this JVM, CapacityScheduler with the
 * DominantResourceCalculator). A node registers over the ResourceTracker protocol with 8 GPUs, as a NodeManager
 * does with the count {@code getDevices()} gave it; then a GPU is lost and recovers in the inventory, and the
 * node's capacity is read back from the ResourceManager's client protocol (what the scheduler places against).
 *
 * <p>One ResourceManager serves the class; each test registers a node of its own (a new port) and unregisters it at
 * the end, as a NodeManager that stops does, so the ResourceManager lists one live node while a test runs.
 */
class CapacityFollowerTest {
    static final String GPU = "nvidia.com/gpu";

    /** Node states of a node that runs (what the follower looks among); a node unregistered is SHUTDOWN. */
    static final EnumSet<NodeState> LIVE = EnumSet.of(NodeState.RUNNING, NodeState.UNHEALTHY, NodeState.NEW);

    @TempDir
    Path tmp;
    static ResourceManager rm;
    static YarnConfiguration conf;
    NodeId node;

    @BeforeAll
    static void resourceManager() throws Exception {
        Optional<String> noHadoop = Jdk.hadoopUgiUnavailable();
        assumeTrue(noHadoop.isEmpty(), noHadoop::get);
        conf = new YarnConfiguration();
        conf.set(YarnConfiguration.RESOURCE_TYPES, GPU);
        conf.set("yarn.scheduler.capacity.resource-calculator",
                "org.apache.hadoop.yarn.util.resource.DominantResourceCalculator");
        for (String key : List.of(YarnConfiguration.RM_ADDRESS, YarnConfiguration.RM_SCHEDULER_ADDRESS,
                YarnConfiguration.RM_RESOURCE_TRACKER_ADDRESS, YarnConfiguration.RM_ADMIN_ADDRESS,
                YarnConfiguration.RM_WEBAPP_ADDRESS)) {
            conf.set(key, "127.0.0.1:" + freePort());
        }
        conf.set("yarn.scheduler.capacity.root.queues", "default");
        conf.set("yarn.scheduler.capacity.root.default.capacity", "100");
        conf.set("yarn.scheduler.capacity.root.default.maximum-capacity", "100");
        conf.setLong(YarnConfiguration.RESOURCEMANAGER_CONNECT_MAX_WAIT_MS, 10_000);
        conf.setLong(YarnConfiguration.RESOURCEMANAGER_CONNECT_RETRY_INTERVAL_MS, 200);
        ResourceUtils.resetResourceTypes(conf);
        org.apache.hadoop.metrics2.lib.DefaultMetricsSystem.setMiniClusterMode(true);
        rm = new ResourceManager();
        rm.init(conf);
        rm.start();
    }

    @BeforeEach
    void node() throws Exception {
        node = NodeId.newInstance(InetAddress.getLocalHost().getHostName(), freePort());
        register();
        assertThat(capacity().getResourceValue(GPU)).isEqualTo(8);
        assertThat(nodes(LIVE)).as("the ResourceManager's live nodes").containsExactly(node);
    }

    /** What a NodeManager sends when it registers: the capacity it computed at start (8 GPUs). */
    private void register() throws Exception {
        ResourceTracker tracker = ServerRMProxy.createRMProxy(conf, ResourceTracker.class);
        try {
            tracker.registerNodeManager(RegisterNodeManagerRequest.newInstance(node, 8042,
                    Resource.newInstance(8192, 8, Map.of(GPU, 8L)), "3.4.2", List.of(), List.of()));
        } finally {
            RPC.stopProxy(tracker);
        }
    }

    /** What a NodeManager sends when it stops; waits until the ResourceManager lists the node SHUTDOWN. */
    @AfterEach
    void unregister() throws Exception {
        if (node == null) {
            return;
        }
        ResourceTracker tracker = ServerRMProxy.createRMProxy(conf, ResourceTracker.class);
        try {
            tracker.unRegisterNodeManager(UnRegisterNodeManagerRequest.newInstance(node));
        } finally {
            RPC.stopProxy(tracker);
        }
        long deadline = System.nanoTime() + 30_000_000_000L;
        while (nodes(LIVE).contains(node) && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
        assertThat(nodes(EnumSet.of(NodeState.SHUTDOWN))).as("the node unregistered").contains(node);
    }

    @AfterAll
    static void stop() {
        if (rm != null) {
            rm.stop();
        }
    }

    @Test
    void aLostGpuLeavesTheNodesCapacityAndComesBackAfterRecovery() throws Exception {
        YarnConfiguration pc = new YarnConfiguration(conf);
        pc.set(GpuschedDevicePlugin.KEY_STATE_DIR, tmp.resolve("ledger").toString());
        pc.set(GpuschedDevicePlugin.KEY_HEALTH_INTERVAL_MS, "100");
        pc.set(GpuschedDevicePlugin.KEY_NODE_ID, node.toString());
        try (SimulatedGpuInventory inv = (SimulatedGpuInventory) GpuInventories.simulated("dgx1-v100")) {
            GpuschedDevicePlugin p = new GpuschedDevicePlugin(inv, pc);
            try {
                assertThat(p.getDevices()).hasSize(8);
                inv.setHealth(3, GpuHealth.unhealthy("XID 79: GPU has fallen off the bus"));
                awaitGpus(7);
                Resource lost = capacity();
                assertThat(lost.getMemorySize()).as("memory untouched").isEqualTo(8192);
                assertThat(lost.getVirtualCores()).as("vcores untouched").isEqualTo(8);
                inv.setHealth(5, GpuHealth.unhealthy("XID 48: double bit ECC error"));
                awaitGpus(6);
                // the NodeManager registers again (as after a ResourceManager restart) with its start-time count
                long before = p.capacityFollower().updates();
                register();
                long deadline = System.nanoTime() + 30_000_000_000L;
                while (p.capacityFollower().updates() == before && System.nanoTime() < deadline) {
                    Thread.sleep(50);
                }
                assertThat(p.capacityFollower().updates()).as("the follower set 6 again over the re-registered 8")
                        .isEqualTo(before + 1);
                awaitGpus(6);
                inv.setHealth(3, GpuHealth.HEALTHY);
                inv.setHealth(5, GpuHealth.HEALTHY);
                awaitGpus(8);
                // one update per change seen: 8 (both at once) or 7 then 8; none when the ResourceManager applied the
                // re-registration's 8 only after the follower's 6 (its reconnect is handled on its own dispatcher),
                // so that it already shows 8 when the GPUs come back (seen once in CI-shaped runs: 3)
                assertThat(p.capacityFollower().updates()).as("one update per change seen").isBetween(before + 1,
                        before + 3);
            } finally {
                p.close();
            }
        }
    }

    /**
     * Issue 32, item 2: capacity is what YARN can hand out. Another process of the node ledger (a scheduler on the
     * same state directory, as the CLI is) takes 2 GPUs: 6; YARN's own container taking 2 more leaves it at 6 (what YARN
     * sold is not "others"); a lost GPU among the free ones: 5; the other process gives its GPUs back: 7; the GPU
     * recovers: 8.
     */
    @Test
    void capacityLeavesOutTheGpusOtherProcessesHoldAndNotYarnsOwnContainers() throws Exception {
        YarnConfiguration pc = new YarnConfiguration(conf);
        Path ledger = tmp.resolve("ledger");
        pc.set(GpuschedDevicePlugin.KEY_STATE_DIR, ledger.toString());
        pc.set(GpuschedDevicePlugin.KEY_HEALTH_INTERVAL_MS, "100");
        pc.set(GpuschedDevicePlugin.KEY_NODE_ID, node.toString());
        try (SimulatedGpuInventory inv = (SimulatedGpuInventory) GpuInventories.simulated("dgx1-v100");
             GpuNode cli = GpuNode.builder().inventory(inv).stateDir(ledger).maintenanceInterval(Duration.ZERO)
                     .auditLogging(false).build()) {
            GpuschedDevicePlugin p = new GpuschedDevicePlugin(inv, pc);
            try {
                Set<Device> all = p.getDevices();
                assertThat(all).hasSize(8);
                Allocation held = cli.scheduler().allocate(GpuRequest.builder().count(2).owner("cli").build());
                awaitGpus(6);
                Set<Device> offer = new TreeSet<>();
                for (Device d : all) {
                    if (!held.deviceIndices().contains(d.getId())) {
                        offer.add(d);
                    }
                }
                Set<Device> got = p.allocateDevices(offer, 2, Map.of("CONTAINER_ID",
                        "container_1700000000000_0001_01_000002"));
                assertThat(got).hasSize(2);
                long updates = p.capacityFollower().updates();
                int free = inv.devices().stream().mapToInt(d -> d.index()).filter(i -> !held.deviceIndices()
                        .contains(i) && got.stream().noneMatch(d -> d.getId() == i)).findFirst().orElseThrow();
                inv.setHealth(free, GpuHealth.unhealthy("XID 79: GPU has fallen off the bus"));
                awaitGpus(5);
                assertThat(p.capacityFollower().updates()).as("YARN's own container changed nothing; the lost GPU"
                        + " did").isEqualTo(updates + 1);
                assertThat(cli.scheduler().release(held.id())).isTrue();
                awaitGpus(7);
                inv.setHealth(free, GpuHealth.HEALTHY);
                awaitGpus(8);
            } finally {
                p.close();
            }
        }
    }

    @Test
    void theNodeIsFoundByHostWhenItIsTheOnlyOneHere() throws Exception {
        YarnConfiguration pc = new YarnConfiguration(conf);
        pc.set(GpuschedDevicePlugin.KEY_STATE_DIR, tmp.resolve("ledger").toString());
        pc.set(GpuschedDevicePlugin.KEY_HEALTH_INTERVAL_MS, "100");
        try (SimulatedGpuInventory inv = (SimulatedGpuInventory) GpuInventories.simulated("dgx1-v100")) {
            GpuschedDevicePlugin p = new GpuschedDevicePlugin(inv, pc);
            try {
                assertThat(p.getDevices()).hasSize(8);
                inv.setHealth(0, GpuHealth.unhealthy("lost"));
                awaitGpus(7);
            } finally {
                p.close();
            }
        }
    }

    /**
     * While a GPU is missing the follower reads the ResourceManager every tick (a re-registration would bring back
     * the start-time count); it does so over the proxies it opened once, not over a new connection per tick (the
     * live NodeManager logged two "Connecting to ResourceManager" lines per tick).
     */
    @Test
    void whileAGpuIsLostTheFollowerPollsOverOneConnection() throws Exception {
        YarnConfiguration pc = new YarnConfiguration(conf);
        pc.set(GpuschedDevicePlugin.KEY_STATE_DIR, tmp.resolve("ledger").toString());
        pc.set(GpuschedDevicePlugin.KEY_HEALTH_INTERVAL_MS, "20");
        pc.set(GpuschedDevicePlugin.KEY_NODE_ID, node.toString());
        try (SimulatedGpuInventory inv = (SimulatedGpuInventory) GpuInventories.simulated("dgx1-v100")) {
            GpuschedDevicePlugin p = new GpuschedDevicePlugin(inv, pc);
            try {
                assertThat(p.getDevices()).hasSize(8);
                inv.setHealth(2, GpuHealth.unhealthy("XID 79: GPU has fallen off the bus"));
                awaitGpus(7);
                CapacityFollower f = p.capacityFollower();
                long from = f.polls();
                long deadline = System.nanoTime() + 30_000_000_000L;
                while (f.polls() < from + 10 && System.nanoTime() < deadline) {
                    Thread.sleep(20);
                }
                assertThat(f.polls()).as("the ResourceManager is read every tick while a GPU is missing")
                        .isGreaterThanOrEqualTo(from + 10);
                assertThat(f.proxiesOpened()).as("proxies opened over " + f.polls() + " reads").isEqualTo(2);
            } finally {
                p.close();
            }
        }
    }

    private void awaitGpus(long want) throws Exception {
        long deadline = System.nanoTime() + 30_000_000_000L;
        long have;
        while ((have = capacity().getResourceValue(GPU)) != want && System.nanoTime() < deadline) {
            Thread.sleep(50);
        }
        assertThat(have).as("GPU capacity of " + node + " at the ResourceManager").isEqualTo(want);
    }

    private Resource capacity() throws Exception {
        return reports(EnumSet.allOf(NodeState.class)).stream().filter(r -> r.getNodeId().equals(node)).findFirst()
                .orElseThrow().getCapability();
    }

    private static List<NodeId> nodes(EnumSet<NodeState> states) throws Exception {
        return reports(states).stream().map(NodeReport::getNodeId).toList();
    }

    private static List<NodeReport> reports(EnumSet<NodeState> states) throws Exception {
        ApplicationClientProtocol client = ClientRMProxy.createRMProxy(conf, ApplicationClientProtocol.class);
        try {
            return client.getClusterNodes(GetClusterNodesRequest.newInstance(states)).getNodeReports();
        } finally {
            RPC.stopProxy(client);
        }
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }
}
