package io.gpusched.yarn;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.host.GpuNode;
import io.gpusched.testing.ClassPathEntry;
import java.io.IOException;
import java.io.OutputStream;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.security.UserGroupInformation;
import org.apache.hadoop.security.token.Token;
import org.apache.hadoop.yarn.api.protocolrecords.AllocateResponse;
import org.apache.hadoop.yarn.api.records.ApplicationAttemptId;
import org.apache.hadoop.yarn.api.records.ApplicationId;
import org.apache.hadoop.yarn.api.records.ApplicationReport;
import org.apache.hadoop.yarn.api.records.ApplicationSubmissionContext;
import org.apache.hadoop.yarn.api.records.Container;
import org.apache.hadoop.yarn.api.records.ContainerLaunchContext;
import org.apache.hadoop.yarn.api.records.ContainerStatus;
import org.apache.hadoop.yarn.api.records.NodeId;
import org.apache.hadoop.yarn.api.records.NodeReport;
import org.apache.hadoop.yarn.api.records.NodeState;
import org.apache.hadoop.yarn.api.records.Priority;
import org.apache.hadoop.yarn.api.records.Resource;
import org.apache.hadoop.yarn.api.records.YarnApplicationState;
import org.apache.hadoop.yarn.client.ClientRMProxy;
import org.apache.hadoop.yarn.client.api.AMRMClient;
import org.apache.hadoop.yarn.client.api.AMRMClient.ContainerRequest;
import org.apache.hadoop.yarn.client.api.NMClient;
import org.apache.hadoop.yarn.client.api.YarnClient;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.security.AMRMTokenIdentifier;
import org.apache.hadoop.yarn.server.resourcemanager.ResourceManager;
import org.apache.hadoop.yarn.server.resourcemanager.rmnode.RMNode;
import org.apache.hadoop.yarn.util.resource.ResourceUtils;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;

/**
 * A live NodeManager: Hadoop 3.4.2's NodeManager in its own JVM, started from Hadoop's jars with the drop-in
 * {@code gpusched-yarn-<version>.jar} the only gpusched jar on its class path, README's yarn-site, resource-types and
 * capacity-scheduler lines loaded as written and README's {@code --add-opens}, the LinuxContainerExecutor with a test
 * container-executor (below) on the cgroup v1 devices controller, NodeManager recovery on, a simulated DGX-1 whose
 * GPUs the test loses and recovers through a health file, and device nodes 195:0..7 made with mknod in a directory of
 * the test ({@code gpusched.yarn.dev-root}). A real ResourceManager (CapacityScheduler, DominantResourceCalculator)
 * runs in the test JVM, and the test is an unmanaged ApplicationMaster asking for 2-GPU default-runtime containers.
 *
 * <p>What replaces README's values, and why: the inventory ({@code simulated:dgx1-v100}: no GPU here); the executor's
 * group ({@code root}) and cgroup hierarchy (one per run, removed at the end); {@code /var/lib/gpusched} in
 * {@code yarn.nodemanager.admin-env} by the test's directory (also the NodeManager's {@code GPUSCHED_STATE_DIR}), and
 * {@code gpusched.yarn.state-dir} unset, as README says for a simulated inventory; the intervals the test waits on
 * (README: 5000 ms) shorter, {@code gpusched.yarn.health-interval-ms} 200 and
 * {@code gpusched.yarn.reconcile-interval-ms} 1000, and the ResourceManager's NodeManager heartbeat 200 ms. README's
 * {@code container-executor.cfg} is not read: the test's container-executor stands in for Hadoop's setuid binary.
 * Each container runs README's {@code eval "$(gpusched env)"} line with {@code gpusched env} replaced by the drop-in
 * jar's {@code io.gpusched.yarn.YarnContainerGpus --inventory simulated:dgx1-v100} (README's alternative for
 * containers without the gpusched command; the command itself is built by gpusched-cli, a module after this one),
 * and finds the ledger through the admin-env's {@code GPUSCHED_STATE_DIR} and YARN's {@code CONTAINER_ID}.
 *
 * <p>The GPUs a container learned are checked against its fence as the container met it (opening a denied node fails
 * with EPERM, the cgroup; an allowed one with ENXIO, no driver behind it), against the ledger file read by this test's
 * own parser, and against {@link YarnContainerGpus#find}. Capacity is read from the ResourceManager
 * ({@code getClusterNodes}).
 *
 * <p>The test container-executor does, as root, what Hadoop's setuid one does for these operations:
 * {@code --checksetup}; {@code --module-devices} writes the excluded devices into the container's
 * {@code devices.deny}; launch (command 1) makes the container's directories, copies the launch script and tokens,
 * starts the script in its own session with its pid in the pid file and in the cgroups' {@code tasks}, and writes the
 * exit code file; signal (2) signals the session; delete (3) removes the paths. At the end every process the test
 * started (the NodeManager, its children, the containers' processes found in their cgroups, launchers orphaned by the
 * killed NodeManager) is killed by pid, the cgroups are removed (the test fails if one stays), the logs are kept in
 * {@code target/live-nodemanager/} and the work directory is deleted.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class LiveNodeManagerIT {
    static final String GPU = "nvidia.com/gpu";
    static final Path DEVICES_CGROUP = Path.of("/sys/fs/cgroup/devices");
    /**
     * NodeManager heartbeats over which a request that must not be placed is watched. With a node heartbeat every
     * 200 ms the CapacityScheduler places a request that fits at the first node heartbeat after the ask reached it,
     * and the ApplicationMaster's next allocate call returns it: 2 heartbeats would show it; 6 leave margin.
     */
    static final int PLACEMENT_HEARTBEATS = 6;

    static Path work;
    static Path dev;
    static Path stateBase;
    static Path ledger;
    static Path healthFile;
    static Path results;
    static Path stops;
    static String hierarchy;
    static ResourceManager rm;
    static YarnConfiguration conf;
    static Process nm;
    static int nmPort;
    static String nmClassPath;
    static List<String> addOpens;
    /** README's line for a default-runtime container, {@code eval "$(gpusched env)"} */
    static String envLine;
    static Path dropIn;
    static GpuInventory inventory;
    static Map<String, Integer> indexByUuid = new HashMap<>();
    static YarnClient yarn;
    static AMRMClient<ContainerRequest> amrm;
    static NMClient nmClient;
    static UserGroupInformation am;
    static final Map<String, Container> launched = new LinkedHashMap<>();
    static final List<ContainerStatus> completed = new ArrayList<>();
    /** allocated by the ResourceManager, not yet started */
    static final List<Container> allocated = new ArrayList<>();
    /** containers asked for and not yet allocated */
    static int wanted;

    @BeforeAll
    static void cluster() throws Exception {
        Assumptions.assumeTrue(Files.isDirectory(DEVICES_CGROUP.resolve("devices.deny").getParent())
                && Files.exists(DEVICES_CGROUP.resolve("devices.deny")),
                "needs the cgroup v1 devices controller at " + DEVICES_CGROUP
                        + " (YARN 3.4 fences devices only there)");
        Assumptions.assumeTrue(Integer.valueOf(0).equals(Files.getAttribute(Path.of("/proc/self"), "unix:uid")),
                "needs root: the test container-executor writes devices cgroups and makes device nodes");
        try (Stream<Path> s = Files.list(Path.of("target"))) {
            dropIn = s.filter(p -> p.getFileName().toString().matches("gpusched-yarn-.*\\.jar")).findFirst()
                    .orElseThrow(() -> new AssertionError("target/gpusched-yarn-<version>.jar is missing: the"
                            + " package phase builds it (run this test with failsafe, mvn verify)"))
                    .toAbsolutePath();
        }
        work = Files.createTempDirectory("yarn-live-nm");
        dev = Files.createDirectories(work.resolve("dev"));
        stateBase = work.resolve("state");
        ledger = stateBase.resolve("simulated").resolve("dgx1-v100");
        healthFile = work.resolve("health");
        results = Files.createDirectories(work.resolve("results"));
        stops = Files.createDirectories(work.resolve("stop"));
        hierarchy = "gpusched-it-" + ProcessHandle.current().pid();
        inventory = GpuInventories.simulated("dgx1-v100");
        for (GpuDevice d : inventory.devices()) {
            indexByUuid.put(d.uuid(), d.index());
            run("mknod", dev.resolve("nvidia" + d.minor().getAsInt()).toString(), "c", "195",
                    "" + d.minor().getAsInt());
        }

        List<String> blocks = ReadmeYarn.xmlBlocks();
        addOpens = ReadmeYarn.addOpens();
        envLine = ReadmeYarn.section().lines().map(String::strip).filter(l -> l.startsWith("eval \"$(gpusched env)\""))
                .map(l -> l.replaceAll("\\s+#.*$", "")).findFirst()
                .orElseThrow(() -> new AssertionError("README's YARN section has no eval \"$(gpusched env)\" line"));
        conf = new YarnConfiguration();
        for (String b : blocks) {
            conf.addResource(new java.io.ByteArrayInputStream(("<configuration>\n" + b + "</configuration>\n")
                    .getBytes(StandardCharsets.UTF_8)), "README.md");
        }
        for (String key : List.of(YarnConfiguration.RM_ADDRESS, YarnConfiguration.RM_SCHEDULER_ADDRESS,
                YarnConfiguration.RM_RESOURCE_TRACKER_ADDRESS, YarnConfiguration.RM_ADMIN_ADDRESS,
                YarnConfiguration.RM_WEBAPP_ADDRESS)) {
            conf.set(key, "127.0.0.1:" + freePort());
        }
        conf.set("yarn.scheduler.capacity.root.queues", "default");
        conf.set("yarn.scheduler.capacity.root.default.capacity", "100");
        conf.set("yarn.scheduler.capacity.root.default.maximum-capacity", "100");
        conf.setLong(YarnConfiguration.RESOURCEMANAGER_CONNECT_MAX_WAIT_MS, 60_000);
        conf.setLong(YarnConfiguration.RESOURCEMANAGER_CONNECT_RETRY_INTERVAL_MS, 200);
        conf.setInt(YarnConfiguration.RM_NM_HEARTBEAT_INTERVAL_MS, 200);
        conf.setLong(YarnConfiguration.RM_AM_EXPIRY_INTERVAL_MS, 600_000);

        nmPort = freePort();
        Path confDir = Files.createDirectories(work.resolve("etc"));
        Configuration site = new Configuration(conf);
        site.set(YarnConfiguration.NM_ADDRESS, "127.0.0.1:" + nmPort);
        site.set(YarnConfiguration.NM_LOCALIZER_ADDRESS, "127.0.0.1:" + freePort());
        site.set(YarnConfiguration.NM_WEBAPP_ADDRESS, "127.0.0.1:" + freePort());
        site.set(YarnConfiguration.NM_COLLECTOR_SERVICE_ADDRESS, "127.0.0.1:" + freePort());
        site.set(YarnConfiguration.NM_LOCAL_DIRS, Files.createDirectories(work.resolve("nm-local")).toString());
        site.set(YarnConfiguration.NM_LOG_DIRS, Files.createDirectories(work.resolve("nm-logs")).toString());
        site.set(YarnConfiguration.NM_LINUX_CONTAINER_EXECUTOR_PATH, containerExecutor().toString());
        site.set("yarn.nodemanager.linux-container-executor.group", "root");
        site.set(YarnConfiguration.NM_LINUX_CONTAINER_CGROUPS_HIERARCHY, "/" + hierarchy);
        site.setInt(YarnConfiguration.NM_PMEM_MB, 8192);
        site.setInt(YarnConfiguration.NM_VCORES, 8);
        site.setBoolean(YarnConfiguration.NM_PMEM_CHECK_ENABLED, false);
        site.setBoolean(YarnConfiguration.NM_VMEM_CHECK_ENABLED, false);
        site.setFloat(YarnConfiguration.NM_MAX_PER_DISK_UTILIZATION_PERCENTAGE, 100f);
        site.setLong(YarnConfiguration.NM_MIN_PER_DISK_FREE_SPACE_MB, 0);
        site.setBoolean(YarnConfiguration.NM_RECOVERY_ENABLED, true);
        site.setBoolean(YarnConfiguration.NM_RECOVERY_SUPERVISED, true);
        site.set(YarnConfiguration.NM_RECOVERY_DIR, work.resolve("nm-recovery").toString());
        site.set(GpuschedDevicePlugin.KEY_INVENTORY, "simulated:dgx1-v100");
        // README's admin-env line with the test's state directory for /var/lib/gpusched; gpusched.yarn.state-dir is
        // left unset (README: with a simulated inventory), so the plugin and the containers' reader both follow the
        // state-directory rule: $GPUSCHED_STATE_DIR/simulated/dgx1-v100
        String adminEnv = site.get("yarn.nodemanager.admin-env");
        assertThat(adminEnv).as("README's yarn.nodemanager.admin-env").contains("GPUSCHED_STATE_DIR=/var/lib/gpusched");
        site.set("yarn.nodemanager.admin-env", adminEnv.replace("/var/lib/gpusched", stateBase.toString()));
        site.unset(GpuschedDevicePlugin.KEY_STATE_DIR);
        site.set(GpuschedDevicePlugin.KEY_DEV_ROOT, dev.toString());
        site.set(GpuschedDevicePlugin.KEY_HEALTH_INTERVAL_MS, "200");
        site.set(GpuschedDevicePlugin.KEY_RECONCILE_INTERVAL_MS, "1000");
        try (OutputStream out = Files.newOutputStream(confDir.resolve("yarn-site.xml"))) {
            site.writeXml(out);
        }
        Files.writeString(confDir.resolve("log4j.properties"), "log4j.rootLogger=INFO,console\n"
                + "log4j.appender.console=org.apache.log4j.ConsoleAppender\n"
                + "log4j.appender.console.target=System.out\n"
                + "log4j.appender.console.layout=org.apache.log4j.PatternLayout\n"
                + "log4j.appender.console.layout.ConversionPattern=%d{ISO8601} %p %c{1}: %m%n\n");

        // entries by what they are (ClassPathEntry), never by the words in their paths: a local repository at
        // /tmp/gpusched-m2 holds Hadoop's jars too (issue 32)
        List<String> cp = new ArrayList<>();
        cp.add(confDir.toString());
        for (ClassPathEntry e : ClassPathEntry.current()) {
            if (e.isGpusched() || e.isArtifact("jna", "jna-platform", "snakeyaml")) {
                continue;
            }
            cp.add(e.path().toString());
        }
        cp.add(dropIn.toString());
        nmClassPath = String.join(java.io.File.pathSeparator, cp);
        assertThat(ClassPathEntry.parse(nmClassPath).stream().filter(ClassPathEntry::isGpusched)
                .map(e -> e.path().toString())).as("gpusched on the NodeManager's class path")
                .containsExactly(dropIn.toString());

        // the NodeManager's JVM starts while the ResourceManager does; it connects once the ResourceManager listens
        startNodeManager();
        ResourceUtils.resetResourceTypes(conf);
        org.apache.hadoop.metrics2.lib.DefaultMetricsSystem.setMiniClusterMode(true);
        rm = new ResourceManager();
        rm.init(conf);
        rm.start();
        awaitGpuCapacity(8, "the NodeManager registered with the GPUs getDevices() reported");

        yarn = YarnClient.createYarnClient();
        yarn.init(conf);
        yarn.start();
        ApplicationSubmissionContext app = yarn.createApplication().getApplicationSubmissionContext();
        ApplicationId appId = app.getApplicationId();
        app.setApplicationName("gpusched-live-nm");
        app.setUnmanagedAM(true);
        app.setAMContainerSpec(ContainerLaunchContext.newInstance(Map.of(), Map.of(), List.of(), null, null, null));
        app.setResource(Resource.newInstance(128, 1));
        yarn.submitApplication(app);
        ApplicationReport report = await(() -> {
            ApplicationReport r = yarn.getApplicationReport(appId);
            return r.getYarnApplicationState() == YarnApplicationState.ACCEPTED
                    && r.getCurrentApplicationAttemptId() != null ? r : null;
        }, "application accepted");
        ApplicationAttemptId attempt = report.getCurrentApplicationAttemptId();
        Token<AMRMTokenIdentifier> token = await(() -> yarn.getAMRMToken(appId), "the AMRM token of " + attempt);
        token.setService(ClientRMProxy.getAMRMTokenService(conf));
        am = UserGroupInformation.createRemoteUser(attempt.toString());
        am.addToken(token);
        amrm = am.doAs((java.security.PrivilegedExceptionAction<AMRMClient<ContainerRequest>>) () -> {
            AMRMClient<ContainerRequest> c = AMRMClient.createAMRMClient();
            c.init(conf);
            c.start();
            c.registerApplicationMaster("", 0, "");
            return c;
        });
        nmClient = NMClient.createNMClient();
        nmClient.init(conf);
        nmClient.start();
    }

    @AfterAll
    static void shutDown() throws Exception {
        if (work == null) {
            return;
        }
        try {
            if (stops != null) {
                for (String id : launched.keySet()) {
                    Files.writeString(stops.resolve(id), "");
                }
            }
            if (nmClient != null) {
                if (nm == null || !nm.isAlive()) { // stopping containers through a NodeManager that is gone retries
                    nmClient.cleanupRunningContainersOnStop(false); // for minutes; they are killed below
                }
                nmClient.stop();
            }
            if (amrm != null) {
                try {
                    am.doAs((java.security.PrivilegedExceptionAction<Void>) () -> {
                        amrm.unregisterApplicationMaster(
                                org.apache.hadoop.yarn.api.records.FinalApplicationStatus.SUCCEEDED, "", "");
                        return null;
                    });
                } catch (Exception e) {
                    // the ResourceManager stops anyway
                }
                amrm.stop();
            }
            if (yarn != null) {
                yarn.stop();
            }
        } finally {
            try {
                List<ProcessHandle> children = nm == null ? List.of() : nm.descendants().toList();
                stopNodeManager(true);
                killContainers(children);
            } finally {
                if (rm != null) {
                    rm.stop();
                }
                if (inventory != null) {
                    inventory.close();
                }
                removeCgroups();
                keepLogsAndDelete();
            }
        }
    }

    /**
     * Kills, by pid, the NodeManager's children, every process in the containers' cgroups and the test
     * container-executor's launchers (orphans of a killed NodeManager).
     */
    private static void killContainers(List<ProcessHandle> nmChildren) throws Exception {
        List<ProcessHandle> victims = new ArrayList<>(nmChildren);
        Path h = DEVICES_CGROUP.resolve(hierarchy);
        if (Files.isDirectory(h)) {
            try (Stream<Path> s = Files.list(h)) {
                for (Path cg : s.filter(Files::isDirectory).toList()) {
                    for (String pid : Files.readAllLines(cg.resolve("tasks"))) {
                        ProcessHandle.of(Long.parseLong(pid.strip())).ifPresent(victims::add);
                    }
                }
            }
        }
        Path launchers = work.resolve("launcher-pids");
        if (Files.exists(launchers)) {
            for (String pid : Files.readAllLines(launchers)) {
                ProcessHandle.of(Long.parseLong(pid.strip())).ifPresent(victims::add);
            }
        }
        for (ProcessHandle p : victims) {
            p.destroyForcibly();
        }
        for (ProcessHandle p : victims) {
            p.onExit().get(30, TimeUnit.SECONDS);
        }
    }

    /** Removes the containers' devices cgroups and the hierarchy the NodeManager made; fails if one stays. */
    private static void removeCgroups() throws Exception {
        Path h = DEVICES_CGROUP.resolve(hierarchy);
        if (!Files.isDirectory(h)) {
            return;
        }
        long until = System.nanoTime() + 30_000_000_000L;
        while (true) {
            try (Stream<Path> s = Files.list(h)) {
                s.filter(Files::isDirectory).forEach(p -> p.toFile().delete());
            }
            h.toFile().delete();
            if (!Files.exists(h) || System.nanoTime() > until) {
                break;
            }
            Thread.sleep(100); // a killed task leaves its cgroup a moment after it exited
        }
        assertThat(h).as("the devices cgroup hierarchy the test made").doesNotExist();
    }

    /** Keeps the NodeManager's and the container-executor's logs in target/, deletes the work directory. */
    private static void keepLogsAndDelete() throws IOException {
        Path keep = Files.createDirectories(Path.of("target", "live-nodemanager"));
        for (String f : List.of("nm.log", "container-executor.log")) {
            if (Files.exists(work.resolve(f))) {
                Files.copy(work.resolve(f), keep.resolve(f), java.nio.file.StandardCopyOption.REPLACE_EXISTING);
            }
        }
        try (Stream<Path> s = Files.walk(work)) {
            s.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        }
    }

    @Test
    @Order(1)
    void defaultRuntimeContainersGetDisjointFencedGpusAndLearnThemFromTheLedger() throws Exception {
        List<Container> got = launch(3, 2);
        Set<Integer> seen = new TreeSet<>();
        for (Container c : got) {
            Set<Integer> mine = checkContainer(c);
            assertThat(mine).hasSize(2);
            assertThat(seen.addAll(mine)).as("disjoint: " + seen + " and " + mine).isTrue();
        }
        assertThat(failed()).as("no container failed").isEmpty();
    }

    @Test
    @Order(2)
    void capacityFollowsALostGpuDownAndBackUpWithoutAContainerFailing() throws Exception {
        Set<Integer> held = new TreeSet<>();
        for (Container c : launched.values()) {
            held.addAll(gpusOf(c));
        }
        int lost = inventory.devices().stream().map(GpuDevice::index).filter(i -> !held.contains(i)).findFirst()
                .orElseThrow();
        Files.writeString(healthFile, lost + " XID 79: GPU has fallen off the bus\n");
        awaitGpuCapacity(7, "GPU " + lost + " lost");
        await(() -> { // an over-allocated container given back leaves the ResourceManager's books on its next heartbeat
            allocate();
            return node().getUsed().getResourceValue(GPU) == 6 ? true : null;
        }, "6 GPUs in use at the ResourceManager (3 containers of 2); node: " + node());
        // 6 GPUs held, 7 sold: a 2-GPU request is not placed (with 8 sold it would be, and fail in the NodeManager)
        am.doAs((java.security.PrivilegedExceptionAction<Void>) () -> {
            wanted++;
            amrm.addContainerRequest(request(2));
            return null;
        });
        assertNothingPlacedOver(PLACEMENT_HEARTBEATS, "placed on a lost GPU");
        Files.writeString(healthFile, "");
        awaitGpuCapacity(8, "GPU " + lost + " recovered");
        Container c = await(() -> {
            allocate();
            return allocated.isEmpty() ? null : allocated.remove(0);
        }, "the waiting request placed after recovery");
        start(c);
        Set<Integer> mine = checkContainer(c);
        assertThat(mine).contains(lost).doesNotContainAnyElementsOf(held);
        assertThat(failed()).as("no container failed").isEmpty();
    }

    @Test
    @Order(3)
    void aNodeManagerRestartWithRecoveryKeepsTheAssignments() throws Exception {
        Map<String, Set<Integer>> before = new LinkedHashMap<>();
        for (Container c : launched.values()) {
            before.put(c.getId().toString(), gpusOf(c));
        }
        assertThat(before.values().stream().mapToInt(Set::size).sum()).as("the node is full: " + before).isEqualTo(8);
        int registrations = registrations();
        stopNodeManager(true);
        startNodeManager();
        await(() -> registrations() > registrations ? true : null, "the restarted NodeManager registers");
        awaitGpuCapacity(8, "the NodeManager registered again");
        assertThat(ledgerFile()).as("the ledger file after the restart").isEqualTo(before);
        try (GpuNode node = readLedger()) {
            for (Map.Entry<String, Set<Integer>> e : before.entrySet()) {
                Optional<Allocation> a = YarnContainerGpus.find(node.scheduler(), e.getKey());
                assertThat(a).as(e.getKey() + " in the ledger after the NodeManager restart").isPresent();
                assertThat(new TreeSet<>(a.get().deviceIndices())).as(e.getKey()).isEqualTo(e.getValue());
            }
        }
        // the node is full; one container finishes and a new one gets exactly its GPUs (YARN's recovered books)
        String first = before.keySet().iterator().next();
        Files.writeString(stops.resolve(first), "");
        ContainerStatus done = await(() -> {
            allocate();
            return completed.stream().filter(s -> s.getContainerId().toString().equals(first)).findFirst()
                    .orElse(null);
        }, "container " + first + " completes");
        assertThat(done.getExitStatus()).as(first + " exit status: " + done.getDiagnostics()).isZero();
        Container next = launch(1, 2).get(0);
        assertThat(checkContainer(next)).isEqualTo(before.get(first));
        assertThat(ledgerFile()).as("finished container released").doesNotContainKey(first);
        try (GpuNode node = readLedger()) {
            assertThat(YarnContainerGpus.find(node.scheduler(), first)).as("finished container released").isEmpty();
        }
        assertThat(failed()).as("no container failed").isEmpty();
    }

    /**
     * Issue 37: containers finish and YARN gets no further GPU request. Within the bound README gives (the reconcile
     * interval after YARN cleaned the container up, and never sooner than the grace after it got its GPUs), their
     * records leave the ledger file, another process of the node (a scheduler in this JVM on the same state
     * directory, as {@code gpusched allocate} is) gets exactly their GPUs, and the node's status no longer lists them.
     */
    @Test
    @Order(4)
    void finishedContainersGpusComeBackWithoutAnotherYarnRequest() throws Exception {
        List<String> running = runningContainers();
        assertThat(running).as("the node is full").hasSize(4);
        List<String> finishing = running.subList(0, 2);
        Set<Integer> theirs = new TreeSet<>();
        for (String id : finishing) {
            theirs.addAll(ledgerFile().get(id));
            Files.writeString(stops.resolve(id), "");
        }
        for (String id : finishing) {
            ContainerStatus done = await(() -> {
                allocate();
                return completed.stream().filter(s -> s.getContainerId().toString().equals(id)).findFirst()
                        .orElse(null);
            }, "container " + id + " completes");
            assertThat(done.getExitStatus()).as(id + ": " + done.getDiagnostics()).isZero();
        }
        long ended = System.nanoTime();
        await(() -> finishing.stream().noneMatch(ledgerFile()::containsKey) ? true : null,
                "the finished containers' records leave the ledger with no further YARN request: " + ledgerFile());
        System.out.printf("finished containers' records released %.1f s after YARN reported them complete%n",
                (System.nanoTime() - ended) / 1e9);
        try (GpuNode cli = readLedger()) {
            Allocation a = cli.scheduler().allocate(GpuRequest.builder().deviceIndices(List.copyOf(theirs))
                    .owner("cli").build());
            assertThat(new TreeSet<>(a.deviceIndices())).isEqualTo(theirs);
            assertThat(cli.scheduler().status().allocations()).as("status lists no finished container")
                    .noneMatch(h -> finishing.contains(h.jobId()));
            assertThat(cli.scheduler().release(a.id())).isTrue();
        }
        assertThat(failed()).as("no container failed").isEmpty();
    }

    /**
     * Issue 32, item 2: another process of the node (the CLI's stand-in: a scheduler in this JVM on the same ledger)
     * takes 2 GPUs: the ResourceManager's capacity goes 8 to 6 and YARN's containers fill the 6 without one failing; a
     * request beyond them is not placed; the other process releases: 8 again, and the waiting request is placed.
     */
    @Test
    @Order(5)
    void capacityFollowsTheGpusAnotherProcessTakesAndGivesBack() throws Exception {
        awaitGpuCapacity(8, "all GPUs sellable");
        try (GpuNode cli = readLedger()) {
            Allocation held = cli.scheduler().allocate(GpuRequest.builder().count(2).owner("cli").build());
            Set<Integer> cliGpus = new TreeSet<>(held.deviceIndices());
            awaitGpuCapacity(6, "the CLI holds GPUs " + cliGpus);
            Container c = launch(1, 2).get(0);
            assertThat(checkContainer(c)).as("the new container's GPUs").doesNotContainAnyElementsOf(cliGpus);
            await(() -> {
                allocate();
                return node().getUsed().getResourceValue(GPU) == 6 ? true : null;
            }, "6 GPUs in use at the ResourceManager; node: " + node());
            am.doAs((java.security.PrivilegedExceptionAction<Void>) () -> {
                wanted++;
                amrm.addContainerRequest(request(2));
                return null;
            });
            assertNothingPlacedOver(PLACEMENT_HEARTBEATS, "placed on the CLI's GPUs");
            assertThat(cli.scheduler().release(held.id())).isTrue();
            awaitGpuCapacity(8, "the CLI released GPUs " + cliGpus);
            Container next = await(() -> {
                allocate();
                return allocated.isEmpty() ? null : allocated.remove(0);
            }, "the waiting request placed after the CLI released");
            start(next);
            assertThat(checkContainer(next)).isEqualTo(cliGpus);
        }
        assertThat(failed()).as("no container failed").isEmpty();
    }

    /**
     * Issue 37, restart: the NodeManager is killed; two of its containers finish while it is down. The restarted
     * NodeManager (recovery on) brings all four back, cleans up the two that ended, and their records are released
     * with no YARN request, while the two still running keep theirs. Then the NodeManager is stopped for good: the
     * records of its running containers are flagged as outliving YARN once the configured time has passed (issue 32,
     * item 3), and not before.
     */
    @Test
    @Order(6)
    void aRestartedNodeManagerReleasesContainersThatEndedWhileItWasDownAndKeepsRunningOnes() throws Exception {
        List<String> running = runningContainers();
        assertThat(running).as("the node is full").hasSize(4);
        Map<String, Set<Integer>> before = ledgerFile();
        int registrations = registrations();
        stopNodeManager(true);
        List<String> endWhileDown = running.subList(0, 2);
        List<String> keepRunning = running.subList(2, 4);
        for (String id : endWhileDown) {
            Files.writeString(stops.resolve(id), "");
        }
        for (String id : endWhileDown) { // the test container-executor writes the exit code when the script ends
            await(() -> {
                try (Stream<Path> s = Files.walk(work.resolve("nm-local"))) {
                    return s.anyMatch(p -> p.getFileName().toString().equals(id + ".pid.exitcode")) ? true : null;
                }
            }, id + " exits while the NodeManager is down");
        }
        assertThat(ledgerFile()).as("nothing changed while no NodeManager ran").isEqualTo(before);
        startNodeManager();
        await(() -> registrations() > registrations ? true : null, "the restarted NodeManager registers");
        await(() -> endWhileDown.stream().noneMatch(ledgerFile()::containsKey) ? true : null,
                "the records of containers that ended while the NodeManager was down are released: " + ledgerFile());
        Map<String, Set<Integer>> after = ledgerFile();
        assertThat(after.keySet()).as("running containers keep their records")
                .containsExactlyInAnyOrderElementsOf(keepRunning);
        for (String id : keepRunning) {
            assertThat(after.get(id)).as(id).isEqualTo(before.get(id));
        }
        for (String id : endWhileDown) {
            ContainerStatus done = await(() -> {
                allocate();
                return completed.stream().filter(s -> s.getContainerId().toString().equals(id)).findFirst()
                        .orElse(null);
            }, "the recovered NodeManager reports " + id + " complete");
            assertThat(done.getExitStatus()).as(id + ": " + done.getDiagnostics()).isZero();
        }
        NodeManagerHeartbeat hb = NodeManagerHeartbeat.read(ledger).orElseThrow();
        assertThat(hb.pid()).as("the heartbeat names the running NodeManager").isEqualTo(nm.pid());
        try (GpuNode n = readLedger()) {
            assertThat(NodeManagerHeartbeat.outlived(ledger, n.scheduler().allocations(), java.time.Instant.now()
                    .plus(Duration.ofDays(1)))).as("a NodeManager runs: nothing outlived it").isEmpty();
        }
        stopNodeManager(true); // YARN removed from the node: its running containers' records stay
        try (GpuNode n = readLedger()) {
            List<Allocation> live = n.scheduler().allocations();
            java.time.Instant seen = NodeManagerHeartbeat.read(ledger).orElseThrow().at();
            assertThat(NodeManagerHeartbeat.outlived(ledger, live, seen.plus(Duration.ofMinutes(9))))
                    .as("not yet: 10 minutes by default").isEmpty();
            NodeManagerHeartbeat.Outlived o = NodeManagerHeartbeat.outlived(ledger, live,
                    seen.plus(Duration.ofMinutes(11))).orElseThrow();
            assertThat(o.ids()).containsExactlyInAnyOrderElementsOf(live.stream().map(Allocation::id).toList());
            assertThat(o.describe("gpusched --state-dir " + ledger)).contains("release " + String.join(" ", o.ids()));
        }
        int again = registrations();
        startNodeManager(); // YARN comes back: its running containers are its own again, nothing outlived it
        await(() -> registrations() > again ? true : null, "the NodeManager registers again");
        await(() -> NodeManagerHeartbeat.read(ledger).filter(h -> h.pid() == nm.pid()).isPresent() ? true : null,
                "the new NodeManager's heartbeat");
        try (GpuNode n = readLedger()) {
            assertThat(NodeManagerHeartbeat.outlived(ledger, n.scheduler().allocations(), java.time.Instant.now()
                    .plus(Duration.ofDays(1)))).isEmpty();
        }
        assertThat(ledgerFile().keySet()).containsExactlyInAnyOrderElementsOf(keepRunning);
    }

    /** @return the ids of the launched containers that have not completed, oldest first */
    private static List<String> runningContainers() throws Exception {
        allocate();
        Set<String> done = new java.util.HashSet<>();
        completed.forEach(s -> done.add(s.getContainerId().toString()));
        return launched.keySet().stream().filter(id -> !done.contains(id)).toList();
    }

    /** @return how often a NodeManager of this test logged its registration with the ResourceManager */
    private static int registrations() throws IOException {
        try (Stream<String> l = Files.lines(work.resolve("nm.log"))) {
            return (int) l.filter(x -> x.contains("Registered with ResourceManager as")).count();
        }
    }

    // ---------------------------------------------------------------------------------------------------------

    private static GpuNode readLedger() {
        return GpuNode.builder().inventory("simulated:dgx1-v100").stateDir(ledger).maintenanceInterval(Duration.ZERO)
                .auditLogging(false).build();
    }

    /**
     * @return the GPUs the container learned, after checking them against its fence (what it could open), the ledger
     *         file as this test reads it and {@link YarnContainerGpus#find}
     */
    private static Set<Integer> checkContainer(Container c) throws Exception {
        String id = c.getId().toString();
        Path out = results.resolve(id);
        await(() -> Files.exists(out) && Files.readString(out).contains("done") ? true : null, id + " reports");
        String text = Files.readString(out);
        String err = Files.exists(results.resolve(id + ".err")) ? Files.readString(results.resolve(id + ".err")) : "";
        assertThat(text).contains("CONTAINER_ID=" + id).contains("GPUSCHED_STATE_DIR=" + stateBase);
        Matcher m = Pattern.compile("(?m)^CUDA_VISIBLE_DEVICES=(GPU-.*)$").matcher(text);
        assertThat(m.find()).as(id + " learned CUDA_VISIBLE_DEVICES with " + envLine + ":\n" + text + err).isTrue();
        Set<Integer> mine = new TreeSet<>();
        for (String uuid : m.group(1).split(",")) {
            assertThat(indexByUuid).as(id + ": " + uuid).containsKey(uuid);
            mine.add(indexByUuid.get(uuid));
        }
        for (GpuDevice d : inventory.devices()) {
            String line = "nvidia" + d.minor().getAsInt() + " ";
            String verdict = text.lines().filter(l -> l.startsWith(line)).findFirst().orElseThrow();
            if (mine.contains(d.index())) {
                assertThat(verdict).as(id + " may open its own GPU").containsIgnoringCase("No such device or address");
            } else {
                assertThat(verdict).as(id + " is fenced off GPU " + d.index()).containsIgnoringCase("not permitted");
            }
        }
        assertThat(gpusOf(c)).as(id + " in the ledger file").isEqualTo(mine);
        try (GpuNode node = readLedger()) {
            assertThat(new TreeSet<>(YarnContainerGpus.find(node.scheduler(), id).orElseThrow().deviceIndices()))
                    .as(id + " by YarnContainerGpus.find").isEqualTo(mine);
        }
        return mine;
    }

    /** @return the container's GPUs in the ledger file, read by this test (not by gpusched), or an empty set */
    private static Set<Integer> gpusOf(Container c) throws IOException {
        return ledgerFile().getOrDefault(c.getId().toString(), Set.of());
    }

    /**
     * The ledger file read independently of gpusched's reader: a header line, then {@code <seq> <crc> <json>} lines;
     * {@code A} adds an allocation (request.indices, request.labels."yarn.container"), {@code R} ends one by id,
     * {@code S} replaces everything with its {@code live} list.
     *
     * @return live allocations by container id
     */
    static Map<String, Set<Integer>> ledgerFile() throws IOException {
        com.fasterxml.jackson.databind.ObjectMapper json = new com.fasterxml.jackson.databind.ObjectMapper();
        Map<String, com.fasterxml.jackson.databind.JsonNode> live = new LinkedHashMap<>();
        List<String> lines = Files.readAllLines(ledger.resolve("ledger"));
        assertThat(lines.get(0)).startsWith("gpusched-ledger ");
        for (int i = 1; i < lines.size(); i++) {
            String[] f = lines.get(i).split(" ", 3);
            com.fasterxml.jackson.databind.JsonNode r;
            try {
                r = json.readTree(f[2]);
            } catch (RuntimeException | IOException e) {
                assertThat(i).as("only the last line may be in the middle of being written: " + lines.get(i))
                        .isEqualTo(lines.size() - 1);
                break;
            }
            switch (r.path("op").asText()) {
                case "A" -> live.put(r.get("id").asText(), r);
                case "R" -> live.remove(r.get("id").asText());
                case "S" -> {
                    live.clear();
                    r.get("live").forEach(a -> live.put(a.get("id").asText(), a));
                }
                default -> {}
            }
        }
        Map<String, Set<Integer>> out = new LinkedHashMap<>();
        for (com.fasterxml.jackson.databind.JsonNode a : live.values()) {
            String cid = a.path("request").path("labels").path(YarnContainerGpus.LABEL).asText("");
            if (!cid.isEmpty()) {
                Set<Integer> gpus = new TreeSet<>();
                a.path("request").path("indices").forEach(x -> gpus.add(x.asInt()));
                assertThat(out.put(cid, gpus)).as("one allocation per container: " + cid).isNull();
            }
        }
        return out;
    }

    private static List<Container> launch(int n, int gpus) throws Exception {
        am.doAs((java.security.PrivilegedExceptionAction<Void>) () -> {
            for (int i = 0; i < n; i++) {
                wanted++;
                amrm.addContainerRequest(request(gpus));
            }
            return null;
        });
        await(() -> {
            allocate();
            return allocated.size() >= n ? true : null;
        }, n + " containers allocated");
        List<Container> got = new ArrayList<>(allocated.subList(0, n));
        allocated.subList(0, n).clear();
        for (Container c : got) {
            start(c);
        }
        return got;
    }

    private static ContainerRequest request(int gpus) {
        return new ContainerRequest(Resource.newInstance(256, 1, Map.of(GPU, (long) gpus)), null, null,
                Priority.newInstance(1));
    }

    private static void start(Container c) throws Exception {
        String javaBin = ProcessHandle.current().info().command().orElse("java");
        String slf4j = ClassPathEntry.current().stream().filter(e -> e.isArtifact("slf4j-api")).findFirst()
                .orElseThrow().path().toString();
        StringBuilder probe = new StringBuilder();
        for (GpuDevice d : inventory.devices()) {
            String node = dev.resolve("nvidia" + d.minor().getAsInt()).toString();
            probe.append("if head -c0 < ").append(node).append(" 2>/dev/null; then echo 'nvidia")
                    .append(d.minor().getAsInt()).append(" opened'; else echo \"nvidia").append(d.minor().getAsInt())
                    .append(" $( (head -c0 < ").append(node).append(") 2>&1 )\"; fi; ");
        }
        String out = results.resolve(c.getId().toString()).toString();
        String reader = envLine.replace("gpusched env", javaBin + " -cp " + dropIn + ":" + slf4j
                + " io.gpusched.yarn.YarnContainerGpus --inventory simulated:dgx1-v100 2>>" + out + ".err");
        String cmd = "{ echo CONTAINER_ID=$CONTAINER_ID; echo GPUSCHED_STATE_DIR=$GPUSCHED_STATE_DIR; " + reader
                + "; echo CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES; " + probe + "echo done; } > " + out
                + ".tmp; mv " + out + ".tmp " + out + "; "
                + "while [ ! -e " + stops.resolve(c.getId().toString()) + " ]; do sleep 0.2; done";
        // ContainerLaunch writes: exec /bin/bash -c "<command>"; escaped so the container's shell evaluates it
        String inQuotes = cmd.replace("\\", "\\\\").replace("\"", "\\\"").replace("$", "\\$").replace("`", "\\`");
        ContainerLaunchContext clc = ContainerLaunchContext.newInstance(Map.of(), Map.of(), List.of(inQuotes), null,
                null, null);
        nmClient.startContainer(c, clc);
        launched.put(c.getId().toString(), c);
    }

    /**
     * One heartbeat of the ApplicationMaster: completed containers go to {@link #completed}, allocated ones to
     * {@link #allocated} (and their requests are removed, as an ApplicationMaster must, or the client asks again);
     * containers beyond what was asked for are given back unstarted.
     */
    private static void allocate() throws Exception {
        am.doAs((java.security.PrivilegedExceptionAction<Void>) () -> {
            AllocateResponse r = amrm.allocate(0.1f);
            completed.addAll(r.getCompletedContainersStatuses());
            for (Container c : r.getAllocatedContainers()) {
                if (wanted > 0) {
                    wanted--;
                    allocated.add(c);
                    amrm.removeContainerRequest(request((int) c.getResource().getResourceValue(GPU)));
                } else {
                    // the client's absolute ask raced an allocation the ResourceManager had made meanwhile
                    amrm.releaseAssignedContainer(c.getId());
                }
            }
            return null;
        });
    }

    /** @return completed containers of this test's (started ones) that did not exit 0 */
    private static List<ContainerStatus> failed() throws Exception {
        allocate();
        return completed.stream().filter(s -> launched.containsKey(s.getContainerId().toString())
                && s.getExitStatus() != 0).toList();
    }

    /**
     * Heartbeats of the ApplicationMaster, each after at least one more NodeManager heartbeat (counted by the
     * ResourceManager's response id for the node, polled: no fixed sleep), none of which may bring an allocation.
     */
    private static void assertNothingPlacedOver(int heartbeats, String what) throws Exception {
        NodeId id = node().getNodeId();
        allocate(); // the ask travels with this call; it is pending at the ResourceManager from here on
        assertThat(allocated).as(what).isEmpty();
        int seen = nmHeartbeats(id);
        for (int i = 0; i < heartbeats; i++) {
            long deadline = System.nanoTime() + 120_000_000_000L;
            int now;
            while ((now = nmHeartbeats(id)) == seen) {
                if (System.nanoTime() > deadline || !nm.isAlive()) {
                    throw new AssertionError("no NodeManager heartbeat within 120 s (NodeManager alive: "
                            + nm.isAlive() + ")\n" + nmLogTail());
                }
                Thread.sleep(20);
            }
            seen = now;
            allocate();
            assertThat(allocated).as(what + " (after NodeManager heartbeat " + (i + 1) + ")").isEmpty();
        }
    }

    /** @return the ResourceManager's response id for the node: one more for each NodeManager heartbeat */
    private static int nmHeartbeats(NodeId id) {
        RMNode n = rm.getRMContext().getRMNodes().get(id);
        return n == null ? -1 : n.getLastNodeHeartBeatResponse().getResponseId();
    }

    private static void awaitGpuCapacity(long want, String why) throws Exception {
        await(() -> {
            NodeReport r = node();
            return r != null && r.getNodeState() == NodeState.RUNNING
                    && r.getCapability().getResourceValue(GPU) == want ? true : null;
        }, "GPU capacity " + want + " at the ResourceManager (" + why + "); node: " + node());
    }

    private static NodeReport node() throws Exception {
        org.apache.hadoop.yarn.api.ApplicationClientProtocol client =
                ClientRMProxy.createRMProxy(conf, org.apache.hadoop.yarn.api.ApplicationClientProtocol.class);
        try {
            return client.getClusterNodes(org.apache.hadoop.yarn.api.protocolrecords.GetClusterNodesRequest
                    .newInstance(EnumSet.allOf(NodeState.class))).getNodeReports().stream()
                    .filter(r -> r.getNodeId().getPort() == nmPort).findFirst().orElse(null);
        } finally {
            org.apache.hadoop.ipc.RPC.stopProxy(client);
        }
    }

    private static void startNodeManager() throws IOException {
        List<String> cmd = new ArrayList<>();
        cmd.add(ProcessHandle.current().info().command().orElse("java"));
        cmd.addAll(addOpens);
        // C1 only and the serial collector: each of the test's 4 NodeManager starts is mostly class loading and
        // compiling, on 2 cores shared with the ResourceManager; nothing the NodeManager does depends on them
        cmd.addAll(List.of("-Xmx512m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", nmClassPath,
                "org.apache.hadoop.yarn.server.nodemanager.NodeManager"));
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.appendTo(work.resolve("nm.log").toFile()));
        pb.environment().put("GPUSCHED_SIMULATED_HEALTH", healthFile.toString());
        pb.environment().put("GPUSCHED_STATE_DIR", stateBase.toString());
        nm = pb.start();
    }

    /** Stops the NodeManager by its pid: SIGKILL ({@code kill}) or SIGTERM, then SIGKILL after 60 s. */
    private static void stopNodeManager(boolean kill) throws InterruptedException {
        if (nm == null) {
            return;
        }
        if (kill) {
            nm.destroyForcibly();
        } else {
            nm.destroy();
        }
        if (!nm.waitFor(60, TimeUnit.SECONDS)) {
            nm.destroyForcibly().waitFor(30, TimeUnit.SECONDS);
        }
        nm = null;
    }

    /** The test container-executor: what Hadoop's does for the operations this NodeManager uses, as root. */
    private static Path containerExecutor() throws IOException {
        Path exe = work.resolve("container-executor");
        String cg = DEVICES_CGROUP.resolve(hierarchy).toString();
        String script =
                """
                        #!/bin/bash
                        echo "$@" >> LOG
                        case "$1" in
                          --checksetup|--mount-cgroups) exit 0 ;;
                          --module-devices)
                            shift; cid=""; excluded=""
                            while [ $# -gt 0 ]; do
                              case "$1" in
                                --container_id) cid="$2"; shift 2 ;;
                                --excluded_devices) excluded="$2"; shift 2 ;;
                                --allowed_devices) shift 2 ;;
                                *) shift ;;
                              esac
                            done
                            d="CGROUP/$cid"
                            [ -d "$d" ] || mkdir -p "$d" || exit 1
                            IFS=',' read -ra rules <<< "$excluded"
                            for r in "${rules[@]}"; do
                              t="${r%%-*}"; rest="${r#*-}"; num="${rest%-*}"; perm="${rest##*-}"
                              echo "$t $num $perm" > "$d/devices.deny" || exit 1
                            done
                            exit 0 ;;
                        esac
                        user="$1"; yarnuser="$2"; op="$3"; shift 3
                        case "$op" in
                          0)
                            appid="$1"; locid="$2"; tokens="$3"; localdirs="$4"; logdirs="$5"; shift 5
                            IFS=',' read -ra lo <<< "$localdirs"
                            for l in "${lo[@]}"; do mkdir -p "$l/usercache/$user/appcache/$appid" "$l/usercache/$user/filecache"; done
                            IFS=',' read -ra ld <<< "$logdirs"
                            for l in "${ld[@]}"; do mkdir -p "$l/$appid"; done
                            app="${lo[0]}/usercache/$user/appcache/$appid"
                            cp "$tokens" "$app/" && cd "$app" && exec "$@"
                            exit 1 ;;
                          1)
                            appid="$1"; cid="$2"; workdir="$3"; script="$4"; tokens="$5"; shift 5
                            if [ "$1" = "--https" ]; then shift 3; else shift 1; fi
                            pidfile="$1"; localdirs="$2"; logdirs="$3"; resources="$4"
                            mkdir -p "$workdir" || exit 1
                            IFS=',' read -ra ld <<< "$logdirs"
                            for l in "${ld[@]}"; do mkdir -p "$l/$appid/$cid"; done
                            IFS=',' read -ra lo <<< "$localdirs"
                            for l in "${lo[@]}"; do mkdir -p "$l/usercache/$user/appcache/$appid/$cid"; done
                            cp "$script" "$workdir/launch_container.sh" && cp "$tokens" "$workdir/container_tokens" || exit 1
                            tasks=""
                            case "$resources" in cgroups=*) tasks="${resources#cgroups=}" ;; esac
                            cd "$workdir"
                            echo $$ >> PIDS
                            export GPUSCHED_TASKS="$tasks" GPUSCHED_PIDFILE="$pidfile"
                            setsid -w /bin/bash -c '
                              IFS="," read -ra ts <<< "$GPUSCHED_TASKS"
                              for t in "${ts[@]}"; do [ "$t" = none ] || echo $$ > "$t" || exit 1; done
                              echo $$ > "$GPUSCHED_PIDFILE.tmp" && mv "$GPUSCHED_PIDFILE.tmp" "$GPUSCHED_PIDFILE"
                              unset GPUSCHED_TASKS GPUSCHED_PIDFILE
                              exec /bin/bash launch_container.sh'
                            rc=$?
                            echo "$rc" > "$pidfile.exitcode.tmp" && mv "$pidfile.exitcode.tmp" "$pidfile.exitcode"
                            exit $rc ;;
                          2)
                            pid="$1"; sig="$2"
                            kill -0 "$pid" 2>/dev/null || exit 9
                            [ "$sig" = 0 ] && exit 0
                            kill -"$sig" -- -"$pid" 2>/dev/null || kill -"$sig" "$pid" 2>/dev/null
                            exit 0 ;;
                          3)
                            target="$1"; shift
                            if [ $# -eq 0 ]; then rm -rf -- "$target"; else for b in "$@"; do rm -rf -- "$b/$target"; done; fi
                            exit 0 ;;
                          *) echo "unsupported container-executor operation $op" >&2; exit 1 ;;
                        esac
                        """
                        .replace("LOG", work.resolve("container-executor.log").toString()).replace("CGROUP", cg)
                        .replace("PIDS", work.resolve("launcher-pids").toString());
        Files.writeString(exe, script);
        Files.setPosixFilePermissions(exe, PosixFilePermissions.fromString("rwxr-xr-x"));
        return exe;
    }

    private static <T> T await(ThrowingSupplier<T> s, String what) throws Exception {
        long deadline = System.nanoTime() + 120_000_000_000L;
        T v = null;
        while ((v = s.get()) == null) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("not within 120 s: " + what + "\nNodeManager log tail:\n" + nmLogTail());
            }
            if (nm != null && !nm.isAlive()) {
                throw new AssertionError("the NodeManager exited (" + nm.exitValue() + ") while waiting for " + what
                        + "\n" + nmLogTail());
            }
            Thread.sleep(100);
        }
        return v;
    }

    interface ThrowingSupplier<T> {
        T get() throws Exception;
    }

    private static String nmLogTail() {
        try {
            List<String> l = Files.readAllLines(work.resolve("nm.log"));
            return String.join("\n", l.subList(Math.max(0, l.size() - 60), l.size()));
        } catch (IOException e) {
            return "(no log: " + e + ")";
        }
    }

    private static void run(String... cmd) throws Exception {
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor()).as(String.join(" ", cmd) + ": " + out).isZero();
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }
}
