package io.gpusched.yarn;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.sim.SimulatedGpuInventory;
import java.io.IOException;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import java.util.stream.Collectors;
import org.apache.hadoop.yarn.api.records.ApplicationAttemptId;
import org.apache.hadoop.yarn.api.records.ApplicationId;
import org.apache.hadoop.yarn.api.records.ContainerId;
import org.apache.hadoop.yarn.api.records.ContainerLaunchContext;
import org.apache.hadoop.yarn.api.records.Resource;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.nodemanager.Context;
import org.apache.hadoop.yarn.server.nodemanager.api.deviceplugin.Device;
import org.apache.hadoop.yarn.server.nodemanager.api.deviceplugin.DeviceRuntimeSpec;
import org.apache.hadoop.yarn.server.nodemanager.api.deviceplugin.YarnRuntimeType;
import org.apache.hadoop.yarn.server.nodemanager.containermanager.container.Container;
import org.apache.hadoop.yarn.server.nodemanager.containermanager.container.ResourceMappings;
import org.apache.hadoop.yarn.server.nodemanager.containermanager.linux.privileged.PrivilegedOperationExecutor;
import org.apache.hadoop.yarn.server.nodemanager.containermanager.linux.resources.CGroupsHandler;
import org.apache.hadoop.yarn.server.nodemanager.containermanager.linux.resources.ResourceHandler;
import org.apache.hadoop.yarn.server.nodemanager.containermanager.linux.resources.ResourceHandlerException;
import org.apache.hadoop.yarn.server.nodemanager.containermanager.linux.runtime.docker.DockerRunCommand;
import org.apache.hadoop.yarn.server.nodemanager.containermanager.resourceplugin.ResourcePluginManager;
import org.apache.hadoop.yarn.server.nodemanager.containermanager.resourceplugin.deviceframework.DeviceMappingManager;
import org.apache.hadoop.yarn.server.nodemanager.containermanager.resourceplugin.deviceframework.DevicePluginAdapter;
import org.apache.hadoop.yarn.server.nodemanager.recovery.NMNullStateStoreService;
import org.apache.hadoop.yarn.util.resource.ResourceUtils;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Drives the plugin the way a Hadoop 3.4 NodeManager does: {@link ResourcePluginManager} loads it by class name from
 * the configuration, wraps it in a {@link DevicePluginAdapter} and registers it as the {@link DeviceMappingManager}'s
 * scheduler; the adapter's resource handler bootstraps, starts and completes containers; its Docker command plugin
 * writes the {@code docker run} arguments; for the default runtime the handler calls container-executor, here a
 * script that records its arguments. The only stand-ins are the NodeManager context, containers and cgroups
 * handler (dynamic proxies that answer exactly the calls the framework makes and fail on any other).
 */
class YarnDeviceFrameworkTest {

    static final String GPU = "nvidia.com/gpu";

    @TempDir
    static Path shared;
    static Path executorLog;

    YarnConfiguration conf;
    final ConcurrentMap<ContainerId, Container> containers = new ConcurrentHashMap<>();
    final List<String> cgroupCalls = new ArrayList<>();
    Context ctx;
    DevicePluginAdapter adapter;
    DeviceMappingManager dmm;
    GpuschedDevicePlugin plugin;
    ResourceHandler handler;
    final TopoText topo = TopoText.dgx1();
    int nextContainer = 1;

    @BeforeAll
    static void fakeContainerExecutor() throws IOException {
        executorLog = shared.resolve("container-executor.log");
        Path exe = shared.resolve("container-executor");
        Files.writeString(exe, "#!/bin/sh\necho \"$@\" >> " + executorLog + "\n");
        Files.setPosixFilePermissions(exe, PosixFilePermissions.fromString("rwxr-xr-x"));
    }

    @BeforeEach
    void nodeManager() throws Exception {
        conf = new YarnConfiguration();
        conf.set(GpuschedDevicePlugin.KEY_STATE_DIR, Files.createTempDirectory(shared, "ledger").toString());
        conf.set(GpuschedDevicePlugin.KEY_HEALTH_INTERVAL_MS, "0");
        conf.setBoolean(YarnConfiguration.NM_PLUGGABLE_DEVICE_FRAMEWORK_ENABLED, true);
        conf.set(YarnConfiguration.NM_PLUGGABLE_DEVICE_FRAMEWORK_DEVICE_CLASSES, GpuschedDevicePlugin.class.getName());
        conf.set(YarnConfiguration.RESOURCE_TYPES, GPU);
        conf.set(YarnConfiguration.LINUX_CONTAINER_RUNTIME_ALLOWED_RUNTIMES, "default,docker");
        conf.set(YarnConfiguration.NM_LINUX_CONTAINER_EXECUTOR_PATH, shared.resolve("container-executor").toString());
        conf.set(GpuschedDevicePlugin.KEY_INVENTORY, "simulated:dgx1-v100");
        ResourceUtils.resetResourceTypes(conf);
        NMNullStateStoreService store = new NMNullStateStoreService();
        ctx = proxy(Context.class, (p, m, a) -> switch (m.getName()) {
            case "getConf" -> conf;
            case "getNMStateStore" -> store;
            case "getContainers" -> containers;
            default -> throw new UnsupportedOperationException("Context." + m.getName());
        });
        CGroupsHandler cgroups = proxy(CGroupsHandler.class, (p, m, a) -> {
            cgroupCalls.add(m.getName() + (a == null ? "" : " " + List.of(a)));
            return switch (m.getName()) {
                case "initializeCGroupController", "deleteCGroup" -> null;
                case "createCGroup", "getPathForCGroupTasks" -> "/sys/fs/cgroup/devices/yarn/" + a[1];
                default -> throw new UnsupportedOperationException("CGroupsHandler." + m.getName());
            };
        });

        ResourcePluginManager rpm = new ResourcePluginManager();
        rpm.initialize(ctx);
        adapter = (DevicePluginAdapter) rpm.getNameToPlugins().get(GPU);
        assertThat(adapter).as("the framework registered our plugin under " + GPU).isNotNull();
        plugin = (GpuschedDevicePlugin) adapter.getDevicePlugin();
        dmm = adapter.getDeviceMappingManager();
        assertThat(dmm.getDevicePluginSchedulers().get(GPU)).as("registered as the device scheduler").isSameAs(plugin);
        handler = adapter.createResourceHandler(ctx, cgroups, PrivilegedOperationExecutor.getInstance(conf));
        handler.bootstrap(conf);
    }

    @Test
    void nodeResourceAndDevicesComeFromTheInventory() throws Exception {
        Resource r = Resource.newInstance(1024, 1);
        adapter.getNodeResourceHandlerInstance().updateConfiguredResource(r);
        assertThat(r.getResourceValue(GPU)).isEqualTo(8);
        Set<Device> allowed = dmm.getAllAllowedDevices().get(GPU);
        List<GpuDevice> gpus = plugin.inventory().devices();
        assertThat(allowed).hasSize(8);
        for (Device d : allowed) {
            GpuDevice g = gpus.get(d.getId());
            assertThat(d.getMajorNumber()).isEqualTo(195);
            assertThat(d.getMinorNumber()).isEqualTo(g.minor().getAsInt());
            assertThat(d.getDevPath()).isEqualTo("/dev/nvidia" + g.minor().getAsInt());
            assertThat(d.getBusID()).isEqualTo(g.pciBusId());
            assertThat(d.isHealthy()).isTrue();
        }
    }

    @Test
    void dockerContainersGetDisjointBestLinkedGpusWithDevicesEnvAndRuntime() throws Exception {
        Container a = container(4, Map.of("YARN_CONTAINER_RUNTIME_TYPE", "docker"));
        assertThat(handler.preStart(a)).as("Docker: no cgroup operation for the container").isNull();
        Set<Integer> ga = indices(dmm.getAllocatedDevices(GPU, a.getContainerId()));
        assertThat(ga).hasSize(4);
        assertThat(topo.linksOf(ga)).as("NVLinks inside " + ga).isEqualTo(topo.bestLinks(0xFF, 4));

        Container b = container(2, Map.of("YARN_CONTAINER_RUNTIME_TYPE", "docker"));
        handler.preStart(b);
        Set<Integer> gb = indices(dmm.getAllocatedDevices(GPU, b.getContainerId()));
        assertThat(gb).hasSize(2).doesNotContainAnyElementsOf(ga);
        assertThat(topo.linksOf(gb)).isEqualTo(topo.bestLinks(0xFF & ~mask(ga), 2));

        DockerRunCommand run = new DockerRunCommand(a.getContainerId().toString(), "alice", "cuda:12");
        adapter.getDockerCommandPluginInstance().updateDockerRunCommand(run, a);
        Map<String, List<String>> args = run.getDockerCommandWithArguments();
        List<GpuDevice> gpus = plugin.inventory().devices();
        Set<String> expectedNodes = ga.stream().map(i -> "/dev/nvidia" + gpus.get(i).minor().getAsInt())
                .map(p -> p + ":" + p).collect(Collectors.toSet());
        assertThat(args.get("devices")).as("docker --device for exactly the container's GPUs (no control node"
                + " exists on this host unless it has NVIDIA's driver)").containsAll(expectedNodes);
        assertThat(args.get("devices").stream().filter(d -> d.matches("/dev/nvidia[0-9]+:.*")).collect(
                Collectors.toSet())).isEqualTo(expectedNodes);
        assertThat(args.get("runtime")).containsExactly("runc");
        Map<String, String> env = run.getEnv();
        assertThat(env.get("CUDA_DEVICE_ORDER")).isEqualTo("PCI_BUS_ID");
        assertThat(Set.of(env.get("CUDA_VISIBLE_DEVICES").split(",")))
                .isEqualTo(ga.stream().map(i -> gpus.get(i).uuid()).collect(Collectors.toSet()));
        assertThat(env.get("NVIDIA_VISIBLE_DEVICES")).isEqualTo(env.get("CUDA_VISIBLE_DEVICES"));

        handler.postComplete(a.getContainerId());
        assertThat(dmm.getAvailableDevices(GPU)).as("A's GPUs are back").isEqualTo(6);
        assertThat(cgroupCalls)
                .anyMatch(c -> c.startsWith("deleteCGroup") && c.contains(a.getContainerId().toString()));
    }

    @Test
    void defaultRuntimeFencesTheChosenDeviceNumbersThroughContainerExecutor() throws Exception {
        Files.deleteIfExists(executorLog);
        Container c = container(2, Map.of());
        assertThat(handler.preStart(c)).as("the pid goes into the container's devices cgroup").hasSize(1);
        Set<Device> got = dmm.getAllocatedDevices(GPU, c.getContainerId());
        String log = Files.readString(executorLog, StandardCharsets.UTF_8);
        String allowed = got.stream().map(d -> d.getMajorNumber() + ":" + d.getMinorNumber())
                .collect(Collectors.joining(","));
        assertThat(log).contains("--allowed_devices " + allowed).contains(c.getContainerId().toString());
        assertThat(topo.linksOf(indices(got))).isEqualTo(topo.bestLinks(0xFF, 2));

        DeviceRuntimeSpec spec = plugin.onDevicesAllocated(got, YarnRuntimeType.RUNTIME_DEFAULT);
        assertThat(spec.getDeviceMounts()).as("default runtime: environment alone").isEmpty();
        assertThat(spec.getVolumeMounts()).isEmpty();
        assertThat(spec.getEnvs()).containsKey("CUDA_VISIBLE_DEVICES");
    }

    @Test
    void unhealthyGpusLeaveTheOfferAndAShortOfferFailsTheContainer() throws Exception {
        SimulatedGpuInventory inv = (SimulatedGpuInventory) plugin.inventory();
        // 2-GPU sets with two NVLinks: 0-3, 0-4, 1-2, 1-5, 2-3, 4-7, 5-6, 6-7. Take GPU 0..3 away, break 6.
        Container hold = container(4, Map.of("YARN_CONTAINER_RUNTIME_TYPE", "docker"));
        handler.preStart(hold);
        Set<Integer> held = indices(dmm.getAllocatedDevices(GPU, hold.getContainerId()));
        int other = held.contains(0) ? 4 : 0;
        int broken = other + 2; // 2 (NV2 with 1 and 3) or 6 (NV2 with 5 and 7)
        inv.setHealth(broken, GpuHealth.unhealthy("XID 79: GPU has fallen off the bus"));

        // YARN sizes the node from getDevices() and never reads isHealthy(): the broken GPU is not reported at all
        assertThat(plugin.getDevices()).hasSize(7).noneMatch(dev -> dev.getId() == broken)
                .allMatch(Device::isHealthy);

        Container c = container(2, Map.of("YARN_CONTAINER_RUNTIME_TYPE", "docker"));
        handler.preStart(c);
        Set<Integer> gc = indices(dmm.getAllocatedDevices(GPU, c.getContainerId()));
        assertThat(gc).doesNotContain(broken).doesNotContainAnyElementsOf(held);
        int offer = 0xFF & ~mask(held) & ~(1 << broken);
        assertThat(topo.linksOf(gc)).isEqualTo(topo.bestLinks(offer, 2));

        // 2 devices left in YARN's books, one of them unhealthy: the framework asks us for 2, we decline, it fails.
        Container d = container(2, Map.of("YARN_CONTAINER_RUNTIME_TYPE", "docker"));
        ResourceHandlerException e = assertThrows(ResourceHandlerException.class, () -> handler.preStart(d));
        assertThat(e.getMessage()).contains("should allocate 2");
        assertThat(dmm.getAllocatedDevices(GPU, d.getContainerId())).isEmpty();
        inv.setHealth(broken, GpuHealth.HEALTHY);
        handler.preStart(d);
        assertThat(indices(dmm.getAllocatedDevices(GPU, d.getContainerId()))).contains(broken);
    }

    @Test
    void badSettingsAreRefusedNamingTheKeyAndTheValidValues() throws IOException {
        YarnConfiguration c = new YarnConfiguration();
        c.set(GpuschedDevicePlugin.KEY_STATE_DIR, Files.createTempDirectory(shared, "ledger").toString());
        c.set(GpuschedDevicePlugin.KEY_HEALTH_INTERVAL_MS, "0");
        c.set(GpuschedDevicePlugin.KEY_INVENTORY, "simulated:dgx1-v100");
        c.set(GpuschedDevicePlugin.KEY_STRATEGY, "fastest");
        GpuschedDevicePlugin p = new GpuschedDevicePlugin();
        p.setConf(c);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, p::getDevices);
        assertThat(e.getMessage()).contains(GpuschedDevicePlugin.KEY_STRATEGY).contains("topology");
        c.set(GpuschedDevicePlugin.KEY_STRATEGY, "topology");
        c.set(GpuschedDevicePlugin.KEY_INVENTORY, "nvml-please");
        p.setConf(c);
        e = assertThrows(IllegalArgumentException.class, p::getDevices);
        assertThat(e.getMessage()).contains(GpuschedDevicePlugin.KEY_INVENTORY).contains("auto").contains("dgx1-v100");
        c.set(GpuschedDevicePlugin.KEY_INVENTORY, "simulated:dgx1-v100");
        c.set(GpuschedDevicePlugin.KEY_DEVICE_NAMING, "names");
        p.setConf(c);
        e = assertThrows(IllegalArgumentException.class, p::getDevices);
        assertThat(e.getMessage()).contains("uuids").contains("indices");
    }

    /**
     * Default-runtime containers never see the plugin's environment; the plugin records each container's GPUs in
     * the node ledger under the CONTAINER_ID that ContainerLaunch puts into the launch environment before the
     * device handler runs (here put there as ContainerLaunch.sanitizeEnv does). Judged from YARN's own books
     * (DeviceMappingManager) against what another process reads from the ledger directory.
     */
    @Test
    void defaultRuntimeContainersFindTheirGpusInTheNodeLedgerByContainerId() throws Exception {
        Path dir = Path.of(conf.get(GpuschedDevicePlugin.KEY_STATE_DIR));
        try (io.gpusched.core.host.GpuNode other = io.gpusched.core.host.GpuNode.builder()
                .inventory("simulated:dgx1-v100").stateDir(dir).maintenanceInterval(java.time.Duration.ZERO).build()) {
            // another process of the node (the CLI, Spark) holds GPU 0: YARN containers must not get it
            io.gpusched.core.Allocation cli = other.scheduler().allocate(
                    io.gpusched.core.GpuRequest.builder().deviceIndices(0).owner("cli").build());
            List<Container> cs = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                Container c = container(2, Map.of());
                c.getLaunchContext().getEnvironment().put("CONTAINER_ID", c.getContainerId().toString());
                handler.preStart(c);
                cs.add(c);
            }
            List<GpuDevice> gpus = plugin.inventory().devices();
            Set<Integer> seen = new TreeSet<>();
            for (Container c : cs) {
                Set<Integer> yarn = indices(dmm.getAllocatedDevices(GPU, c.getContainerId()));
                assertThat(yarn).hasSize(2).doesNotContain(0);
                assertThat(seen.addAll(yarn)).as("disjoint").isTrue();
                String id = c.getContainerId().toString();
                io.gpusched.core.Allocation a = YarnContainerGpus.find(other.scheduler(), id).orElseThrow();
                assertThat(new TreeSet<>(a.deviceIndices())).as(id).isEqualTo(yarn);
                Map<String, String> env = YarnContainerGpus.environment(other.scheduler(), id,
                        io.gpusched.cuda.CudaEnvironmentResolver.builder().build()).orElseThrow();
                assertThat(Set.of(env.get("CUDA_VISIBLE_DEVICES").split(",")))
                        .isEqualTo(yarn.stream().map(i -> gpus.get(i).uuid()).collect(Collectors.toSet()));
            }
            // the first container finishes; the next allocation (YARN offers its GPUs again) releases its record
            String done = cs.get(0).getContainerId().toString();
            handler.postComplete(cs.get(0).getContainerId());
            Container next = container(1, Map.of());
            next.getLaunchContext().getEnvironment().put("CONTAINER_ID", next.getContainerId().toString());
            handler.preStart(next);
            assertThat(YarnContainerGpus.find(other.scheduler(), done)).as("finished container released").isEmpty();
            assertThat(YarnContainerGpus.find(other.scheduler(), cs.get(1).getContainerId().toString())).isPresent();
            assertThat(other.scheduler().allocation(cli.id())).as("the other process keeps GPU 0").isPresent();
            assertThrows(IllegalArgumentException.class, () -> YarnContainerGpus.find(other.scheduler(), "c_1"));
        }
    }

    // ---------------------------------------------------------------------------------------------------------

    private Container container(int gpus, Map<String, String> env) {
        ContainerId id = ContainerId.newContainerId(
                ApplicationAttemptId.newInstance(ApplicationId.newInstance(1_700_000_000_000L, 1), 1), nextContainer++);
        Resource r = Resource.newInstance(1024, 1, Map.of(GPU, (long) gpus));
        ContainerLaunchContext launch = ContainerLaunchContext.newInstance(Map.of(), new HashMap<>(env), List.of(),
                Map.of(), null, Map.of());
        ResourceMappings mappings = new ResourceMappings();
        Container c = proxy(Container.class, (p, m, a) -> switch (m.getName()) {
            case "getContainerId" -> id;
            case "getResource" -> r;
            case "getLaunchContext" -> launch;
            case "getResourceMappings" -> mappings;
            case "isContainerInFinalStates" -> false;
            case "toString" -> "container " + id;
            case "hashCode" -> id.hashCode();
            case "equals" -> p == a[0];
            default -> throw new UnsupportedOperationException("Container." + m.getName());
        });
        containers.put(id, c);
        return c;
    }

    private static Set<Integer> indices(Set<Device> ds) {
        return ds.stream().map(Device::getId).collect(Collectors.toCollection(TreeSet::new));
    }

    private static int mask(Set<Integer> s) {
        int m = 0;
        for (int i : s) {
            m |= 1 << i;
        }
        return m;
    }

    @SuppressWarnings("unchecked")
    private static <T> T proxy(Class<T> type, InvocationHandler h) {
        return (T) Proxy.newProxyInstance(type.getClassLoader(), new Class<?>[]{type}, h);
    }
}
