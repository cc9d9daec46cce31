package io.gpusched.yarn.adversarial;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.yarn.GpuschedDevicePlugin;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.yarn.server.nodemanager.api.deviceplugin.Device;
import org.apache.hadoop.yarn.server.nodemanager.api.deviceplugin.DeviceRuntimeSpec;
import org.apache.hadoop.yarn.server.nodemanager.api.deviceplugin.MountDeviceSpec;
import org.apache.hadoop.yarn.server.nodemanager.api.deviceplugin.YarnRuntimeType;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Adversarial checks of the YARN device plugin against its documented contract, with hostile offers (devices the node
 * does not have, one GPU offered under two ids, unhealthy GPUs, silly counts) on a node whose minor numbers differ
 * from the indices. Every expectation is computed here from the inventory the test built, never asked of the plugin.
 */
@Tag("adversarial")
class YarnPluginAttackTest {

    private static final int N = 4;
    /** index i has minor MINOR[i]: reversed and offset, so minor and index never agree. */
    private static final int[] MINOR = {13, 12, 11, 10};

    @TempDir
    Path tmp;

    private static SimulatedGpuInventory node() {
        SimulatedGpuInventory.Builder b = SimulatedGpuInventory.builder("attack-node");
        for (int i = 0; i < N; i++) {
            b.device(GpuDevice.builder().index(i).uuid("GPU-attack-" + i).vendor(GpuVendor.NVIDIA)
                    .name("Tesla V100").memory(MemorySize.ofGibibytes(16)).pciBusId("00000000:0" + (i + 1) + ":00.0")
                    .minor(MINOR[i]).build());
        }
        return b.links(0, 1, 2).links(2, 3, 2).links(0, 2, 1).build();
    }

    private static Configuration conf() {
        Configuration c = new Configuration(false);
        try {
            c.set(GpuschedDevicePlugin.KEY_STATE_DIR,
                    java.nio.file.Files.createTempDirectory("gpusched-yarn").toString());
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
        c.set(GpuschedDevicePlugin.KEY_HEALTH_INTERVAL_MS, "0");
        return c;
    }

    private static int indexOfMinor(int minor) {
        for (int i = 0; i < N; i++) {
            if (MINOR[i] == minor) {
                return i;
            }
        }
        return -1;
    }

    private static Device unknownDevice(int id, int minor) {
        return Device.Builder.newInstance().setId(id).setDevPath("/dev/nvidia" + minor).setMajorNumber(195)
                .setMinorNumber(minor).setBusID("00000000:7f:00.0").setHealthy(true).build();
    }

    private static Set<Integer> minors(Set<Device> ds) {
        return ds.stream().map(Device::getMinorNumber).collect(Collectors.toCollection(TreeSet::new));
    }

    @Test
    void reportedDevicesCarryTheInventorysMinorAndBusIdNotTheIndex() {
        try (SimulatedGpuInventory inv = node()) {
            GpuschedDevicePlugin p = new GpuschedDevicePlugin(inv, conf());
            Set<Device> all = p.getDevices();
            assertEquals(N, all.size(), "one device per GPU: " + all);
            for (Device d : all) {
                int idx = indexOfMinor(d.getMinorNumber());
                assertTrue(idx >= 0, "minor " + d.getMinorNumber() + " is not one of the node's: " + d);
                assertEquals(inv.devices().get(idx).pciBusId().toLowerCase(), d.getBusID().toLowerCase(),
                        "bus id of the GPU with minor " + d.getMinorNumber());
                assertTrue(d.isHealthy(), d.toString());
            }
            assertEquals(N, all.stream().map(Device::getId).distinct().count(), "ids unique: " + all);
        }
    }

    @Test
    void neverChoosesADeviceTheNodeDoesNotHave() {
        try (SimulatedGpuInventory inv = node()) {
            GpuschedDevicePlugin p = new GpuschedDevicePlugin(inv, conf());
            Set<Device> offer = Set.of(unknownDevice(90, 90), unknownDevice(91, 91));
            assertEquals(Set.of(), p.allocateDevices(offer, 1, new HashMap<>()),
                    "an offer of GPUs this node does not have cannot be served");
            Set<Device> mixed = new HashSet<>(p.getDevices());
            mixed.add(unknownDevice(90, 90));
            assertEquals(Set.of(), p.allocateDevices(mixed, N + 1, new HashMap<>()),
                    "only " + N + " real GPUs in the offer; " + (N + 1) + " cannot be served");
            Set<Device> got = p.allocateDevices(mixed, N, new HashMap<>());
            assertEquals(p.getDevices(), got, "all real GPUs and not the stranger");
        }
    }

    @Test
    void oneGpuOfferedUnderTwoIdsIsNotGivenTwice() {
        try (SimulatedGpuInventory inv = node()) {
            GpuschedDevicePlugin p = new GpuschedDevicePlugin(inv, conf());
            Device real = p.getDevices().stream().filter(d -> d.getMinorNumber() == MINOR[0]).findFirst()
                    .orElseThrow();
            Device twin = Device.Builder.newInstance().setId(real.getId() + 100).setDevPath(real.getDevPath())
                    .setMajorNumber(real.getMajorNumber()).setMinorNumber(real.getMinorNumber())
                    .setBusID(real.getBusID()).setHealthy(true).build();
            Set<Device> offer = Set.of(real, twin);
            assertEquals(2, offer.size(), "Hadoop's Device.equals tells them apart by id");
            Set<Device> got = p.allocateDevices(offer, 2, new HashMap<>());
            assertEquals(Set.of(), got, "two ids of one GPU are one GPU: a 2-GPU container cannot get it twice, got "
                    + got);
        }
    }

    @Test
    void countsZeroNegativeAndTooLarge() {
        try (SimulatedGpuInventory inv = node()) {
            GpuschedDevicePlugin p = new GpuschedDevicePlugin(inv, conf());
            Set<Device> all = p.getDevices();
            assertEquals(Set.of(), p.allocateDevices(all, 0, new HashMap<>()), "count 0");
            assertEquals(Set.of(), p.allocateDevices(all, -1, new HashMap<>()), "count -1");
            assertEquals(Set.of(), p.allocateDevices(all, N + 1, new HashMap<>()), "count > offer");
            assertEquals(Set.of(), p.allocateDevices(Set.of(), 1, new HashMap<>()), "empty offer");
            assertEquals(Set.of(), p.allocateDevices(all, Integer.MAX_VALUE, new HashMap<>()), "huge count");
        }
    }

    @Test
    void nullEnvironmentIsAccepted() {
        try (SimulatedGpuInventory inv = node()) {
            GpuschedDevicePlugin p = new GpuschedDevicePlugin(inv, conf());
            Set<Device> got = p.allocateDevices(p.getDevices(), 2, null);
            assertEquals(2, got.size(), "null env (the framework passes the container's env, which may be null)");
        }
    }

    @Test
    void everyAnswerIsASubsetOfTheOfferOfTheRightSize() {
        try (SimulatedGpuInventory inv = node()) {
            GpuschedDevicePlugin p = new GpuschedDevicePlugin(inv, conf());
            List<Device> all = List.copyOf(p.getDevices());
            for (int mask = 1; mask < (1 << N); mask++) {
                Set<Device> offer = new HashSet<>();
                for (int i = 0; i < N; i++) {
                    if ((mask & (1 << i)) != 0) {
                        offer.add(all.get(i));
                    }
                }
                for (int count = 1; count <= N; count++) {
                    Set<Device> got = p.allocateDevices(offer, count, new HashMap<>());
                    if (count > offer.size()) {
                        assertEquals(Set.of(), got, "offer " + offer + " count " + count);
                    } else {
                        assertEquals(count, got.size(), "offer " + offer + " count " + count + " got " + got);
                        assertTrue(offer.containsAll(got), "offer " + offer + " got " + got);
                    }
                }
            }
        }
    }

    @Test
    void gpuTurningUnhealthyAfterGetDevicesIsNotChosen() {
        try (SimulatedGpuInventory inv = node()) {
            GpuschedDevicePlugin p = new GpuschedDevicePlugin(inv, conf());
            Set<Device> offer = p.getDevices();
            inv.setHealth(1, GpuHealth.unhealthy("XID 79: fell off the bus"));
            Set<Device> got = p.allocateDevices(offer, N - 1, new HashMap<>());
            assertEquals(N - 1, got.size(), "three healthy GPUs remain: " + got);
            assertTrue(!minors(got).contains(MINOR[1]), "unhealthy GPU (minor " + MINOR[1] + ") chosen: " + got);
            assertEquals(Set.of(), p.allocateDevices(offer, N, new HashMap<>()), "only three healthy");
            Set<Device> again = p.getDevices();
            assertTrue(again.stream().noneMatch(d -> d.getMinorNumber() == MINOR[1]),
                    "an unhealthy GPU is not reported to YARN (it sizes the node by the count): " + again);
            assertEquals(N - 1, again.size(), "" + again);
        }
    }

    @Test
    void dockerSpecExposesExactlyTheChosenGpusNodes() throws Exception {
        Path dev = Files.createDirectories(tmp.resolve("dev"));
        for (int m : MINOR) {
            Files.createFile(dev.resolve("nvidia" + m));
        }
        Files.createFile(dev.resolve("nvidiactl"));
        try (SimulatedGpuInventory inv = node()) {
            Configuration c = conf();
            c.set(GpuschedDevicePlugin.KEY_DEV_ROOT, dev.toString());
            GpuschedDevicePlugin p = new GpuschedDevicePlugin(inv, c);
            Set<Device> offer = p.getDevices().stream()
                    .filter(d -> d.getMinorNumber() == MINOR[2] || d.getMinorNumber() == MINOR[3])
                    .collect(Collectors.toSet());
            Set<Device> got = p.allocateDevices(offer, 2, new HashMap<>());
            assertEquals(offer, got);
            DeviceRuntimeSpec spec = p.onDevicesAllocated(got, YarnRuntimeType.RUNTIME_DOCKER);
            Pattern gpuNode = Pattern.compile(".*/nvidia(\\d+)$");
            Set<Integer> exposed = new TreeSet<>();
            for (MountDeviceSpec m : spec.getDeviceMounts()) {
                Matcher mm = gpuNode.matcher(m.getDevicePathInHost());
                if (mm.matches()) {
                    exposed.add(Integer.parseInt(mm.group(1)));
                }
            }
            assertEquals(Set.of(MINOR[2], MINOR[3]), exposed, "GPU nodes by minor, not by index: "
                    + spec.getDeviceMounts());
            String cvd = spec.getEnvs().get("CUDA_VISIBLE_DEVICES");
            assertNotNull(cvd, spec.getEnvs().toString());
            assertEquals(Set.of("GPU-attack-2", "GPU-attack-3"), Set.of(cvd.split(",")), "uuids of the chosen GPUs");
            DeviceRuntimeSpec plain = p.onDevicesAllocated(got, YarnRuntimeType.RUNTIME_DEFAULT);
            assertTrue(plain.getDeviceMounts().isEmpty(), "default runtime: environment alone");
            assertEquals(cvd, plain.getEnvs().get("CUDA_VISIBLE_DEVICES"));
        }
    }

    @Test
    void indexNamingUsesIndicesNotMinors() {
        try (SimulatedGpuInventory inv = node()) {
            Configuration c = conf();
            c.set(GpuschedDevicePlugin.KEY_DEVICE_NAMING, "indices");
            GpuschedDevicePlugin p = new GpuschedDevicePlugin(inv, c);
            Set<Device> pick = p.getDevices().stream().filter(d -> d.getMinorNumber() == MINOR[0])
                    .collect(Collectors.toSet());
            DeviceRuntimeSpec spec = p.onDevicesAllocated(pick, YarnRuntimeType.RUNTIME_DEFAULT);
            assertEquals("0", spec.getEnvs().get("CUDA_VISIBLE_DEVICES"), spec.getEnvs().toString());
        }
    }

    @Test
    void onDevicesAllocatedRefusesAStranger() {
        try (SimulatedGpuInventory inv = node()) {
            GpuschedDevicePlugin p = new GpuschedDevicePlugin(inv, conf());
            try {
                p.onDevicesAllocated(Set.of(unknownDevice(90, 90)), YarnRuntimeType.RUNTIME_DOCKER);
                fail("a device the node does not know must be refused");
            } catch (IllegalArgumentException e) {
                assertTrue(e.getMessage().contains("90"), e.getMessage());
            }
        }
    }

    private static void assertBadSetting(String key, String value, String... valid) {
        Configuration c = conf();
        c.set(GpuschedDevicePlugin.KEY_INVENTORY, "simulated:dgx1-v100");
        c.set(key, value);
        GpuschedDevicePlugin p = new GpuschedDevicePlugin();
        try {
            p.setConf(c);
            p.getRegisterRequestInfo();
            Set<Device> all = p.getDevices();
            p.onDevicesAllocated(p.allocateDevices(all, 2, new HashMap<>()), YarnRuntimeType.RUNTIME_DOCKER);
            fail(key + "=" + value + " was accepted");
        } catch (IllegalArgumentException e) {
            String msg = String.valueOf(e.getMessage());
            assertTrue(msg.contains(key), "names the key: " + msg);
            assertTrue(msg.contains(value), "names the value: " + msg);
            for (String v : valid) {
                assertTrue(msg.contains(v), "names valid value " + v + ": " + msg);
            }
        } finally {
            p.close();
        }
    }

    @Test
    void badSettingsNameTheKeyAndTheValidValues() {
        assertBadSetting(GpuschedDevicePlugin.KEY_STRATEGY, "bogus", "topology", "packing", "spreading", "thermal");
        assertBadSetting(GpuschedDevicePlugin.KEY_DEVICE_NAMING, "names", "uuids", "indices");
        // the Docker runtime is an open set (any name in container-executor's docker.allowed.runtimes): not checked
        assertBadSetting(GpuschedDevicePlugin.KEY_INVENTORY, "bogus", "auto", "simulated:");
        assertBadSetting(GpuschedDevicePlugin.KEY_RESOURCE_NAME, "not a name", "nvidia.com/gpu");
        assertBadSetting(GpuschedDevicePlugin.KEY_RESOURCE_NAME, "nvidia.com/", "nvidia.com/gpu");
        for (String ok : List.of("nvidia.com/gpu", "amd.com/gpu", "example-vendor.io/gpu_v2", "gpu")) {
            Configuration c = conf();
            c.set(GpuschedDevicePlugin.KEY_RESOURCE_NAME, ok);
            GpuschedDevicePlugin p = new GpuschedDevicePlugin();
            p.setConf(c);
            assertEquals(ok, p.getRegisterRequestInfo().getResourceName());
        }
    }

    /**
     * README.md's YARN section, as pasted: every XML block is loaded with Hadoop's own configuration loader, the
     * classes it names load, and the plugin accepts its settings (inventory and state directory are replaced: this
     * host has no GPU and the test must not write /var/lib/gpusched).
     */
    @Test
    void readmeLinesAreAccepted() throws Exception {
        List<String> blocks = io.gpusched.yarn.ReadmeYarn.xmlBlocks();
        assertEquals(2, blocks.size(), "yarn-site and resource-types/capacity-scheduler blocks: " + blocks);
        Configuration c = new Configuration(false);
        for (String b : blocks) {
            c.addResource(new java.io.ByteArrayInputStream(("<configuration>\n" + b + "</configuration>\n")
                    .getBytes(java.nio.charset.StandardCharsets.UTF_8)), "README.md");
        }
        assertEquals("org.apache.hadoop.yarn.server.nodemanager.LinuxContainerExecutor",
                c.get("yarn.nodemanager.container-executor.class"));
        for (String key : List.of("yarn.nodemanager.container-executor.class",
                "yarn.nodemanager.pluggable-device-framework.device-classes",
                "yarn.scheduler.capacity.resource-calculator")) {
            assertNotNull(Class.forName(c.get(key)), key);
        }
        assertEquals(GpuschedDevicePlugin.class.getName(),
                c.get("yarn.nodemanager.pluggable-device-framework.device-classes"));
        assertEquals("true", c.get("yarn.nodemanager.pluggable-device-framework.enabled"));
        assertEquals("nvidia.com/gpu", c.get("yarn.resource-types"));
        assertTrue(c.get("yarn.nodemanager.admin-env").contains("GPUSCHED_STATE_DIR="),
                c.get("yarn.nodemanager.admin-env"));
        for (String key : List.of(GpuschedDevicePlugin.KEY_RESOURCE_NAME, GpuschedDevicePlugin.KEY_INVENTORY,
                GpuschedDevicePlugin.KEY_STRATEGY, GpuschedDevicePlugin.KEY_DEVICE_NAMING,
                GpuschedDevicePlugin.KEY_DOCKER_RUNTIME, GpuschedDevicePlugin.KEY_STATE_DIR,
                GpuschedDevicePlugin.KEY_HEALTH_INTERVAL_MS)) {
            assertNotNull(c.get(key), "README sets " + key);
        }
        assertEquals("auto", c.get(GpuschedDevicePlugin.KEY_INVENTORY));
        c.set(GpuschedDevicePlugin.KEY_INVENTORY, "simulated:dgx1-v100");
        c.set(GpuschedDevicePlugin.KEY_STATE_DIR, Files.createTempDirectory("gpusched-readme").toString());
        c.set(GpuschedDevicePlugin.KEY_HEALTH_INTERVAL_MS, "0");
        GpuschedDevicePlugin p = new GpuschedDevicePlugin();
        p.setConf(c);
        try {
            assertEquals(c.get(GpuschedDevicePlugin.KEY_RESOURCE_NAME), p.getRegisterRequestInfo().getResourceName());
            assertEquals(8, p.getDevices().size());
            for (String s : List.of("packing", "spreading", "thermal")) {
                Configuration c2 = new Configuration(c);
                c2.set(GpuschedDevicePlugin.KEY_STRATEGY, s);
                c2.set(GpuschedDevicePlugin.KEY_STATE_DIR, Files.createTempDirectory("gpusched-readme").toString());
                GpuschedDevicePlugin q = new GpuschedDevicePlugin();
                q.setConf(c2);
                assertEquals(3, q.allocateDevices(q.getDevices(), 3, new HashMap<>(Map.of())).size(), s);
                q.close();
            }
        } finally {
            p.close();
        }
    }
}
