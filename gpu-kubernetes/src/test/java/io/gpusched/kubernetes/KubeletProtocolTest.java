package io.gpusched.kubernetes;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.kubernetes.api.v1beta1.AllocateRequest;
import io.gpusched.kubernetes.api.v1beta1.AllocateResponse;
import io.gpusched.kubernetes.api.v1beta1.ContainerAllocateRequest;
import io.gpusched.kubernetes.api.v1beta1.ContainerAllocateResponse;
import io.gpusched.kubernetes.api.v1beta1.ContainerPreferredAllocationRequest;
import io.gpusched.kubernetes.api.v1beta1.Device;
import io.gpusched.kubernetes.api.v1beta1.DevicePluginGrpc;
import io.gpusched.kubernetes.api.v1beta1.DeviceSpec;
import io.gpusched.kubernetes.api.v1beta1.Empty;
import io.gpusched.kubernetes.api.v1beta1.ListAndWatchResponse;
import io.gpusched.kubernetes.api.v1beta1.PreferredAllocationRequest;
import io.gpusched.kubernetes.api.v1beta1.PreferredAllocationResponse;
import io.gpusched.kubernetes.internal.UnixSockets;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The plug-in driven as the kubelet drives it, through {@link KubeletStandIn} over real Unix sockets: registration,
 * ListAndWatch on health changes, Allocate, kubelet restarts, two resources, malformed requests.
 */
class KubeletProtocolTest {
    @TempDir
    Path dir;

    @BeforeEach
    void epoll() {
        assumeTrue(UnixSockets.available(), () -> "epoll Unix domain sockets unavailable here: "
                + UnixSockets.unavailabilityCause());
    }

    static DevicePluginConfig.Builder config(Path dir) {
        return DevicePluginConfig.builder().pluginDirectory(dir.resolve("device-plugins"))
                .recoveryHold(Duration.ZERO).registerRetry(Duration.ofMillis(100))
                .devRoot(dir.resolve("dev")).procRoot(dir.resolve("proc"));
    }

    /** @return the plugin's count of registrations once it reaches {@code n}, or after 30 s, whatever it is then */
    static int awaitRegistrations(KubeletDevicePlugin plugin, int n) throws InterruptedException {
        long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        while (plugin.registrations() < n && System.nanoTime() < deadline) {
            Thread.sleep(5);
        }
        return plugin.registrations();
    }

    static Path kubeletDir(Path dir) throws java.io.IOException {
        return Files.createDirectories(dir.resolve("device-plugins"));
    }

    @Test
    void registersWithTheFieldsTheKubeletChecksAfterServing() throws Exception {
        try (SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100");
             KubeletStandIn kubelet = new KubeletStandIn(kubeletDir(dir));
             KubeletDevicePlugin plugin = KubeletDevicePlugin.start(inv, config(dir).build())) {
            KubeletStandIn.Registration r = kubelet.awaitRegistration(1);
            assertThat(r.request().getVersion()).isEqualTo("v1beta1");
            assertThat(r.request().getResourceName()).isEqualTo("nvidia.com/gpu");
            assertThat(r.request().getEndpoint()).isEqualTo("gpusched-nvidia.com-gpu.sock").doesNotContain("/");
            assertThat(r.request().getOptions().getGetPreferredAllocationAvailable()).isTrue();
            assertThat(r.request().getOptions().getPreStartRequired()).isFalse();
            // the stand-in dialled back before answering: the options it got are the ones the kubelet uses
            assertThat(r.options()).isEqualTo(r.request().getOptions());
            assertThat(dir.resolve("device-plugins/gpusched-nvidia.com-gpu.sock")).exists();
            // the stand-in has the request before the plugin has the answer that it counts
            assertThat(awaitRegistrations(plugin, 1)).isEqualTo(1);
            ListAndWatchResponse list = kubelet.watch("nvidia.com/gpu").next();
            assertThat(list.getDevicesList()).hasSize(8).allSatisfy(d -> {
                assertThat(d.getHealth()).isEqualTo("Healthy");
                assertThat(d.getID().length()).isLessThanOrEqualTo(63);
            });
            assertThat(list.getDevicesList().stream().map(Device::getID).toList())
                    .isEqualTo(inv.devices().stream().map(GpuDevice::uuid).toList());
            // NUMA: 0-3 on node 0, 4-7 on node 1
            for (int i = 0; i < 8; i++) {
                assertThat(list.getDevices(i).getTopology().getNodesList()).hasSize(1);
                assertThat(list.getDevices(i).getTopology().getNodes(0).getID()).isEqualTo(i < 4 ? 0L : 1L);
            }
        }
    }

    @Test
    void listAndWatchSendsANewListWhenAGpuIsLostAndWhenItIsBack() throws Exception {
        try (SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100");
             KubeletStandIn kubelet = new KubeletStandIn(kubeletDir(dir));
             KubeletDevicePlugin plugin = KubeletDevicePlugin.start(inv, config(dir).build())) {
            kubelet.awaitRegistration(1);
            KubeletStandIn.Watch w = kubelet.watch("nvidia.com/gpu");
            assertThat(unhealthy(w.next())).isEmpty();
            inv.setHealth(3, GpuHealth.lost("XID 79: fallen off the bus"));
            assertThat(unhealthy(w.next())).containsExactly(inv.devices().get(3).uuid());
            // a new reason is no change for the kubelet: no list for it; the next list is the next real change
            inv.setHealth(3, GpuHealth.unhealthy("XID 48"));
            inv.setHealth(5, GpuHealth.unhealthy("XID 94"));
            assertThat(unhealthy(w.next())).containsExactly(inv.devices().get(3).uuid(), inv.devices().get(5).uuid());
            inv.setHealth(3, GpuHealth.HEALTHY);
            assertThat(unhealthy(w.next())).containsExactly(inv.devices().get(5).uuid());
            inv.setHealth(5, GpuHealth.HEALTHY);
            ListAndWatchResponse all = w.next();
            assertThat(unhealthy(all)).isEmpty();
            assertThat(all.getDevicesCount()).isEqualTo(8);
            assertThat(w.completed).as("the stream is never completed while serving").isFalse();
            assertThat(w.error).isNull();
        }
    }

    @Test
    void aRecoveredGpuIsAdvertisedHealthyOnlyAfterTheHoldAndAFlapNeverShowsHealthy() throws Exception {
        try (SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100");
             KubeletStandIn kubelet = new KubeletStandIn(kubeletDir(dir));
             KubeletDevicePlugin plugin = KubeletDevicePlugin.start(inv, config(dir)
                     .recoveryHold(Duration.ofMillis(400)).build())) {
            kubelet.awaitRegistration(1);
            KubeletStandIn.Watch w = kubelet.watch("nvidia.com/gpu");
            w.next();
            String two = inv.devices().get(2).uuid();
            inv.setHealth(2, GpuHealth.unhealthy("XID 48"));
            assertThat(unhealthy(w.next())).containsExactly(two);
            // flapping: healthy for less than the hold, then sick again, several times
            for (int i = 0; i < 5; i++) {
                inv.setHealth(2, GpuHealth.HEALTHY);
                inv.setHealth(2, GpuHealth.unhealthy("XID 48 again"));
            }
            // a sentinel change: the next list the kubelet sees is this one, no Healthy list for GPU 2 came before it
            String six = inv.devices().get(6).uuid();
            inv.setHealth(6, GpuHealth.lost("XID 79"));
            assertThat(unhealthy(w.next())).containsExactly(two, six);
            // healthy for good: advertised Healthy again once the hold has passed
            inv.setHealth(2, GpuHealth.HEALTHY);
            assertThat(unhealthy(w.next())).containsExactly(six);
        }
    }

    @Test
    void allocateAnswersEnvDeviceSpecsAndControlNodes() throws Exception {
        Files.createDirectories(dir.resolve("proc"));
        Files.writeString(dir.resolve("proc/devices"), "Character devices:\n  1 mem\n195 nvidia\n508 nvidia-uvm\n"
                + "\nBlock devices:\n  8 sd\n");
        Files.createDirectories(dir.resolve("dev"));
        Files.createFile(dir.resolve("dev/nvidia-uvm"));
        Files.createFile(dir.resolve("dev/nvidia-uvm-tools"));
        try (SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100");
             KubeletStandIn kubelet = new KubeletStandIn(kubeletDir(dir));
             KubeletDevicePlugin plugin = KubeletDevicePlugin.start(inv, config(dir).build())) {
            kubelet.awaitRegistration(1);
            String u4 = inv.devices().get(4).uuid();
            String u7 = inv.devices().get(7).uuid();
            String u1 = inv.devices().get(1).uuid();
            AllocateResponse r = kubelet.client("nvidia.com/gpu").allocate(AllocateRequest.newBuilder()
                    .addContainerRequests(ContainerAllocateRequest.newBuilder().addDevicesIds(u7).addDevicesIds(u4))
                    .addContainerRequests(ContainerAllocateRequest.newBuilder().addDevicesIds(u1)).build());
            assertThat(r.getContainerResponsesCount()).isEqualTo(2);
            ContainerAllocateResponse c0 = r.getContainerResponses(0);
            assertThat(c0.getEnvsMap()).containsEntry("NVIDIA_VISIBLE_DEVICES", u4 + "," + u7)
                    .containsEntry("CUDA_VISIBLE_DEVICES", u4 + "," + u7)
                    .containsEntry("CUDA_DEVICE_ORDER", "PCI_BUS_ID");
            assertThat(specs(c0)).containsExactlyInAnyOrder("/dev/nvidia4", "/dev/nvidia7", "/dev/nvidiactl",
                    "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools");
            assertThat(c0.getDevicesList()).allSatisfy(d -> {
                assertThat(d.getHostPath()).isEqualTo(d.getContainerPath());
                assertThat(d.getPermissions()).isEqualTo("rw");
            });
            assertThat(c0.getCdiDevicesList()).isEmpty();
            ContainerAllocateResponse c1 = r.getContainerResponses(1);
            assertThat(c1.getEnvsMap()).containsEntry("NVIDIA_VISIBLE_DEVICES", u1);
            assertThat(specs(c1)).contains("/dev/nvidia1").doesNotContain("/dev/nvidia4", "/dev/nvidia7");
        }
    }

    /**
     * Issue 32: on a host whose nvidia-uvm module is not loaded yet (no major in the fixture /proc/devices, no node in
     * /dev), Allocate still names /dev/nvidia-uvm and /dev/nvidia-uvm-tools (a device spec is a path: the runtime reads
     * the number when it creates the container); and the same once the module is loaded, read at that Allocate.
     */
    @Test
    void allocateNamesTheUvmNodesWhetherOrNotTheModuleIsLoaded() throws Exception {
        Files.createDirectories(dir.resolve("proc"));
        Files.writeString(dir.resolve("proc/devices"), "Character devices:\n  1 mem\n195 nvidia\n\nBlock devices:\n");
        Files.createDirectories(dir.resolve("dev"));
        SimulatedGpuInventory.Builder b = SimulatedGpuInventory.builder("host");
        for (int i = 0; i < 2; i++) { // a node that does not describe its own majors, as NVML's does not
            b.device(GpuDevice.builder().index(i).uuid("GPU-uvm-" + i).vendor(GpuVendor.NVIDIA).name("NVIDIA A10")
                    .memory(MemorySize.ofGibibytes(24)).pciBusId("00000000:1" + i + ":00.0").minor(i).build());
        }
        try (SimulatedGpuInventory inv = b.build();
             KubeletStandIn kubelet = new KubeletStandIn(kubeletDir(dir));
             KubeletDevicePlugin plugin = KubeletDevicePlugin.start(inv, config(dir).build())) {
            kubelet.awaitRegistration(1);
            for (boolean loaded : List.of(false, true)) {
                if (loaded) {
                    Files.writeString(dir.resolve("proc/devices"), "Character devices:\n195 nvidia\n511 nvidia-uvm\n");
                }
                ContainerAllocateResponse c = kubelet.client("nvidia.com/gpu").allocate(AllocateRequest.newBuilder()
                        .addContainerRequests(ContainerAllocateRequest.newBuilder().addDevicesIds("GPU-uvm-1"))
                        .build()).getContainerResponses(0);
                assertThat(specs(c)).as("module loaded: " + loaded).containsExactlyInAnyOrder("/dev/nvidia1",
                        "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools");
                assertThat(c.getDevicesList()).allSatisfy(d -> assertThat(d.getPermissions()).isEqualTo("rw"));
            }
        }
    }

    @Test
    void allocateNamesCdiDevicesByUuidWhenCdiIsOn() throws Exception {
        try (SimulatedGpuInventory inv = GpuInventories.simulated("dgx-h100");
             KubeletStandIn kubelet = new KubeletStandIn(kubeletDir(dir));
             KubeletDevicePlugin plugin = KubeletDevicePlugin.start(inv, config(dir).cdi(true).build())) {
            kubelet.awaitRegistration(1);
            String u0 = inv.devices().get(0).uuid();
            String u6 = inv.devices().get(6).uuid();
            ContainerAllocateResponse c = kubelet.client("nvidia.com/gpu").allocate(AllocateRequest.newBuilder()
                    .addContainerRequests(ContainerAllocateRequest.newBuilder().addDevicesIds(u6).addDevicesIds(u0))
                    .build()).getContainerResponses(0);
            assertThat(c.getCdiDevicesList().stream().map(d -> d.getName()).toList())
                    .containsExactly("nvidia.com/gpu=" + u0, "nvidia.com/gpu=" + u6);
            assertThat(c.getDevicesList()).isEmpty();
            assertThat(c.getEnvsMap()).doesNotContainKey("NVIDIA_VISIBLE_DEVICES")
                    .containsEntry("CUDA_VISIBLE_DEVICES", u0 + "," + u6);
        }
    }

    @Test
    void amdGpusAreServedAsAmdResourceWithRenderAndKfdNodes() throws Exception {
        Files.createDirectories(dir.resolve("proc"));
        Files.writeString(dir.resolve("proc/devices"), "Character devices:\n226 drm\n510 kfd\n");
        try (SimulatedGpuInventory inv = GpuInventories.simulated("mi210-8x");
             KubeletStandIn kubelet = new KubeletStandIn(kubeletDir(dir));
             KubeletDevicePlugin plugin = KubeletDevicePlugin.start(inv, config(dir).build())) {
            KubeletStandIn.Registration reg = kubelet.awaitRegistration(1);
            assertThat(reg.request().getResourceName()).isEqualTo("amd.com/gpu");
            GpuDevice d0 = inv.devices().get(0);
            ContainerAllocateResponse c = kubelet.client("amd.com/gpu").allocate(AllocateRequest.newBuilder()
                    .addContainerRequests(ContainerAllocateRequest.newBuilder().addDevicesIds(d0.uuid())).build())
                    .getContainerResponses(0);
            assertThat(specs(c)).contains("/dev/dri/renderD" + d0.minor().getAsInt(), "/dev/kfd");
            // these UUIDs are not ROCm's GPU- form: no ROCR_VISIBLE_DEVICES (indices would be wrong in a container)
            assertThat(c.getEnvsMap()).doesNotContainKeys("ROCR_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES");
        }
    }

    @Test
    void reRegistersOnEveryKubeletRestart() throws Exception {
        try (SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100");
             KubeletStandIn kubelet = new KubeletStandIn(kubeletDir(dir));
             KubeletDevicePlugin plugin = KubeletDevicePlugin.start(inv, config(dir).build())) {
            kubelet.awaitRegistration(1);
            for (int restart = 1; restart <= 2; restart++) {
                kubelet.restart();
                KubeletStandIn.Registration r = kubelet.awaitRegistration(1 + restart);
                assertThat(r.request().getResourceName()).isEqualTo("nvidia.com/gpu");
                assertThat(dir.resolve("device-plugins").resolve(r.request().getEndpoint())).exists();
                // the new server answers: a fresh ListAndWatch, and a preferred allocation
                inv.setHealth(restart, GpuHealth.unhealthy("XID 48"));
                KubeletStandIn.Watch w = kubelet.watch("nvidia.com/gpu");
                assertThat(unhealthy(w.next())).contains(inv.devices().get(restart).uuid());
                PreferredAllocationResponse p = kubelet.client("nvidia.com/gpu").getPreferredAllocation(
                        preferred(ids(inv, 0, 2, 3), List.of(), 2));
                assertThat(p.getContainerResponses(0).getDeviceIDsList()).hasSize(2);
            }
            assertThat(awaitRegistrations(plugin, 3)).isEqualTo(3);
        }
    }

    @Test
    void servesTwoResourceNamesAtOnce() throws Exception {
        SimulatedGpuInventory.Builder b = SimulatedGpuInventory.builder("a100-mixed");
        for (int i = 0; i < 2; i++) {
            b.device(GpuDevice.builder().index(i).uuid("GPU-" + i + "0000000-0000-0000-0000-000000000000")
                    .vendor(GpuVendor.NVIDIA).name("NVIDIA A100-SXM4-80GB").memory(MemorySize.parse("80GB"))
                    .pciBusId("00000000:0" + i + ":00.0").numaNode(0).minor(i).build());
        }
        String parent = "GPU-20000000-0000-0000-0000-000000000000";
        for (int i = 2; i < 9; i++) {
            b.device(GpuDevice.builder().index(i).uuid("MIG-" + i + "0000000-0000-0000-0000-000000000000")
                    .vendor(GpuVendor.NVIDIA).name(i < 6 ? "NVIDIA A100-SXM4-80GB MIG 1g.10gb"
                            : "NVIDIA A100-SXM4-80GB MIG 2g.20gb")
                    .memory(MemorySize.parse(i < 6 ? "10GB" : "20GB"))
                    .pciBusId("00000000:02:00.0").numaNode(1).minor(2).parentUuid(parent).build());
        }
        b.links(0, 1, 12);
        try (SimulatedGpuInventory inv = b.build();
             KubeletStandIn kubelet = new KubeletStandIn(kubeletDir(dir));
             KubeletDevicePlugin plugin = KubeletDevicePlugin.start(inv, config(dir).build())) {
            kubelet.awaitRegistration(3);
            assertThat(kubelet.registrations().stream().map(r -> r.request().getResourceName()))
                    .containsExactlyInAnyOrder("nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/mig-2g.20gb");
            assertThat(kubelet.registrations().stream().map(r -> r.request().getEndpoint()).distinct()).hasSize(3);
            assertThat(kubelet.watch("nvidia.com/gpu").next().getDevicesList()).hasSize(2);
            assertThat(kubelet.watch("nvidia.com/mig-1g.10gb").next().getDevicesList().stream().map(Device::getID))
                    .containsExactly(ids(inv, 2, 3, 4, 5).toArray(String[]::new));
            assertThat(kubelet.watch("nvidia.com/mig-2g.20gb").next().getDevicesList()).hasSize(3);
            // an id of one resource is unknown to the other
            assertThatThrownBy(() -> kubelet.client("nvidia.com/gpu").allocate(AllocateRequest.newBuilder()
                    .addContainerRequests(ContainerAllocateRequest.newBuilder().addDevicesIds(inv.devices().get(3)
                            .uuid()))
                    .build())).satisfies(e -> assertThat(status(e)).isEqualTo(Status.Code.INVALID_ARGUMENT));
            ContainerAllocateResponse mig = kubelet.client("nvidia.com/mig-1g.10gb").allocate(AllocateRequest
                    .newBuilder().addContainerRequests(ContainerAllocateRequest.newBuilder()
                            .addDevicesIds(inv.devices().get(3).uuid()))
                    .build()).getContainerResponses(0);
            assertThat(mig.getEnvsMap()).containsEntry("NVIDIA_VISIBLE_DEVICES", inv.devices().get(3).uuid());
        }
    }

    @Test
    void malformedRequestsAreGrpcErrorsAndThePluginKeepsServing() throws Exception {
        try (SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100");
             KubeletStandIn kubelet = new KubeletStandIn(kubeletDir(dir));
             KubeletDevicePlugin plugin = KubeletDevicePlugin.start(inv, config(dir).build())) {
            kubelet.awaitRegistration(1);
            DevicePluginGrpc.DevicePluginBlockingStub c = kubelet.client("nvidia.com/gpu");
            List<String> all = ids(inv, 0, 1, 2, 3, 4, 5, 6, 7);
            List<PreferredAllocationRequest> bad = List.of(
                    preferred(List.of("GPU-nope"), List.of(), 1),
                    preferred(all, List.of(), 9),
                    preferred(all, List.of(), 0),
                    preferred(all, List.of(), -3),
                    preferred(ids(inv, 1, 2), ids(inv, 0), 2),
                    preferred(all, ids(inv, 0, 1, 2), 2),
                    preferred(List.of(all.get(0), all.get(0)), List.of(), 1),
                    preferred(List.of("x".repeat(10_000)), List.of(), 1));
            for (PreferredAllocationRequest r : bad) {
                String what = r.toString();
                assertThatThrownBy(() -> c.getPreferredAllocation(r))
                        .as(what.substring(0, Math.min(300, what.length())))
                        .satisfies(e -> assertThat(status(e)).isEqualTo(Status.Code.INVALID_ARGUMENT));
            }
            assertThatThrownBy(() -> c.allocate(AllocateRequest.newBuilder().addContainerRequests(
                    ContainerAllocateRequest.newBuilder().addDevicesIds("GPU-unknown")).build()))
                    .satisfies(e -> assertThat(status(e)).isEqualTo(Status.Code.INVALID_ARGUMENT))
                    .hasMessageContaining("GPU-unknown");
            assertThatThrownBy(() -> c.allocate(AllocateRequest.newBuilder().addContainerRequests(
                    ContainerAllocateRequest.newBuilder()).build()))
                    .satisfies(e -> assertThat(status(e)).isEqualTo(Status.Code.INVALID_ARGUMENT));
            inv.setHealth(6, GpuHealth.lost("XID 79"));
            KubeletStandIn.Watch w = kubelet.watch("nvidia.com/gpu");
            assertThat(unhealthy(w.next())).containsExactly(all.get(6));
            assertThatThrownBy(() -> c.allocate(AllocateRequest.newBuilder().addContainerRequests(
                    ContainerAllocateRequest.newBuilder().addDevicesIds(all.get(6))).build()))
                    .satisfies(e -> assertThat(status(e)).isEqualTo(Status.Code.FAILED_PRECONDITION))
                    .hasMessageContaining(all.get(6));
            // an empty request is valid and answered empty; the plug-in still answers real ones
            assertThat(c.getPreferredAllocation(PreferredAllocationRequest.getDefaultInstance())
                    .getContainerResponsesCount()).isZero();
            assertThat(c.getPreferredAllocation(preferred(all, List.of(), 8)).getContainerResponses(0)
                    .getDeviceIDsCount()).isEqualTo(8);
            assertThat(c.getDevicePluginOptions(Empty.getDefaultInstance()).getGetPreferredAllocationAvailable())
                    .isTrue();
        }
    }

    @Test
    void timeSlicingAdvertisesReplicasAndSpreadsThem() throws Exception {
        try (SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100");
             KubeletStandIn kubelet = new KubeletStandIn(kubeletDir(dir));
             KubeletDevicePlugin plugin = KubeletDevicePlugin.start(inv, config(dir).replicas(3).build())) {
            kubelet.awaitRegistration(1);
            ListAndWatchResponse list = kubelet.watch("nvidia.com/gpu").next();
            assertThat(list.getDevicesList()).hasSize(24)
                    .allSatisfy(d -> assertThat(d.getID()).matches("GPU-.*::[0-2]").hasSizeLessThanOrEqualTo(63));
            List<String> ids = list.getDevicesList().stream().map(Device::getID).toList();
            List<String> three = kubelet.client("nvidia.com/gpu").getPreferredAllocation(preferred(ids, List.of(), 3))
                    .getContainerResponses(0).getDeviceIDsList();
            assertThat(three.stream().map(i -> i.substring(0, i.indexOf("::"))).distinct()).hasSize(3);
            String u0 = inv.devices().get(0).uuid();
            ContainerAllocateResponse c = kubelet.client("nvidia.com/gpu").allocate(AllocateRequest.newBuilder()
                    .addContainerRequests(ContainerAllocateRequest.newBuilder().addDevicesIds(u0 + "::0")
                            .addDevicesIds(u0 + "::2"))
                    .build()).getContainerResponses(0);
            assertThat(c.getEnvsMap()).containsEntry("NVIDIA_VISIBLE_DEVICES", u0);
        }
        assertThat(DevicePluginConfig.builder().replicas(2).build().sharingWarning()).get().asString()
                .contains("no memory isolation");
    }

    @Test
    void aNodeWithNothingToAdvertiseNeverRegisters() throws Exception {
        SimulatedGpuInventory.Builder b = SimulatedGpuInventory.builder("mig-unknown");
        b.device(GpuDevice.builder().index(0).uuid("MIG-x").vendor(GpuVendor.NVIDIA).name("MIG device")
                .memory(MemorySize.parse("10GB")).pciBusId("00000000:01:00.0").parentUuid("GPU-p").build());
        try (SimulatedGpuInventory inv = b.build();
             KubeletStandIn kubelet = new KubeletStandIn(kubeletDir(dir));
             KubeletDevicePlugin plugin = KubeletDevicePlugin.start(inv, config(dir).build())) {
            assertThat(plugin.resources()).isEmpty();
            Thread.sleep(500);
            assertThat(kubelet.registrations()).isEmpty();
        }
    }

    @Test
    void closeRemovesTheSocketAndEndsTheStream() throws Exception {
        try (SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100");
             KubeletStandIn kubelet = new KubeletStandIn(kubeletDir(dir))) {
            KubeletDevicePlugin plugin = KubeletDevicePlugin.start(inv, config(dir).build());
            kubelet.awaitRegistration(1);
            KubeletStandIn.Watch w = kubelet.watch("nvidia.com/gpu");
            w.next();
            plugin.close();
            assertThat(dir.resolve("device-plugins/gpusched-nvidia.com-gpu.sock")).doesNotExist();
            long until = System.nanoTime() + 60_000_000_000L; // up to 60 s: a loaded machine
            while (!w.completed && w.error == null && System.nanoTime() < until) {
                Thread.sleep(20);
            }
            assertThat(w.completed || w.error != null).isTrue();
        }
    }

    // ---- helpers ----

    static List<String> unhealthy(ListAndWatchResponse r) {
        return r.getDevicesList().stream().filter(d -> d.getHealth().equals("Unhealthy")).map(Device::getID).toList();
    }

    static List<String> ids(SimulatedGpuInventory inv, int... indices) {
        Map<Integer, String> byIndex = inv.devices().stream().collect(Collectors.toMap(GpuDevice::index,
                GpuDevice::uuid));
        return java.util.Arrays.stream(indices).mapToObj(byIndex::get).toList();
    }

    static PreferredAllocationRequest preferred(List<String> available, List<String> must, int size) {
        return PreferredAllocationRequest.newBuilder().addContainerRequests(ContainerPreferredAllocationRequest
                .newBuilder().addAllAvailableDeviceIDs(available).addAllMustIncludeDeviceIDs(must)
                .setAllocationSize(size)).build();
    }

    static List<String> specs(ContainerAllocateResponse c) {
        return c.getDevicesList().stream().map(DeviceSpec::getContainerPath).toList();
    }

    static Status.Code status(Throwable e) {
        return e instanceof StatusRuntimeException s ? s.getStatus().getCode() : null;
    }
}
