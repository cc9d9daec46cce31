package io.gpusched.kubernetes.adversarial.review65;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.UsageOwner;
import io.gpusched.kubernetes.PodResourcesAttribution;
import io.gpusched.kubernetes.PodResourcesStandIn;
import io.gpusched.kubernetes.api.podresources.v1.CDIDevice;
import io.gpusched.kubernetes.api.podresources.v1.ClaimResource;
import io.gpusched.kubernetes.api.podresources.v1.ContainerDevices;
import io.gpusched.kubernetes.api.podresources.v1.ContainerResources;
import io.gpusched.kubernetes.api.podresources.v1.DynamicResource;
import io.gpusched.kubernetes.api.podresources.v1.PodResources;
import io.gpusched.kubernetes.internal.UnixSockets;
import io.gpusched.testing.ManualClock;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review 65. docs/ACCOUNTING.md charges a process on a GPU to "the pod, namespace and container" PodResources assigns
 * it to (owner {@code POD}, id {@code <namespace>/<pod>}); a GPU several containers share is charged to no one
 * because "PodResources cannot tell their processes apart" (the known case: two pods time-slicing a GPU). A DRA
 * ResourceClaim referenced by two containers of one pod (NVIDIA's DRA driver's own example, "gpu-test2": one pod, two
 * containers, one shared GPU) is listed under both containers: whose processes are whose between the two containers
 * does not matter to the owner, which is the same pod either way ({@code ml/shared}); yet {@code ownerOf} answers
 * empty as soon as the container names differ, so the pod's GPU is metered for no one and {@code report --by pod}
 * never shows it.
 */
class TwoContainersOfOnePodSharingAGpuTest {
    @TempDir
    Path dir;
    PodResourcesStandIn kubelet;
    PodResourcesAttribution source;
    final ManualClock clock = new ManualClock(Instant.parse("2026-03-02T10:00:00Z"));

    static final GpuDevice GPU1 = GpuDevice.builder().index(1).uuid("GPU-aaaaaaaa-0000-4000-8000-000000000001")
            .vendor(GpuVendor.NVIDIA).name("A100").memory(MemorySize.ofGibibytes(80)).pciBusId("00000000:0F:00.0")
            .build();

    @BeforeEach
    void start() throws Exception {
        assumeTrue(UnixSockets.available(), () -> "epoll Unix domain sockets unavailable: "
                + UnixSockets.unavailabilityCause());
        Path podResources = Files.createDirectories(dir.resolve("pod-resources"));
        Files.setPosixFilePermissions(podResources, PosixFilePermissions.fromString("rwxr-x---"));
        kubelet = new PodResourcesStandIn(podResources);
        source = PodResourcesAttribution.open(podResources, Duration.ofSeconds(10), clock);
    }

    @AfterEach
    void stop() throws Exception {
        if (source != null) {
            source.close();
        }
        if (kubelet != null) {
            kubelet.close();
        }
    }

    private static ContainerResources container(String name) {
        return ContainerResources.newBuilder().setName(name).addDynamicResources(DynamicResource.newBuilder()
                .setClaimName("shared-gpu").setClaimNamespace("ml").addClaimResources(ClaimResource.newBuilder()
                        .setDriverName("gpu.nvidia.com").setPoolName("node1").setDeviceName("gpu-1")
                        .addCdiDevices(CDIDevice.newBuilder().setName("k8s.gpu.nvidia.com/device=" + GPU1.uuid()))))
                .build();
    }

    @Test
    void aGpuSharedByTwoContainersOfOnePodIsThatPods() {
        kubelet.set(PodResources.newBuilder().setNamespace("ml").setName("shared").addContainers(container("ctr0"))
                .addContainers(container("ctr1")).build());
        assertThat(source.holdersOf(GPU1)).as("precondition: the kubelet lists the pod's two containers on GPU 1")
                .isNotEmpty();
        assertThat(source.ownerOf(GPU1, 4242, List.of()).map(UsageOwner::id))
                .as("GPU 1 is assigned to one pod only (its two containers share one claim): every process on it is"
                        + " that pod's, whichever container runs it; holders listed: %s", source.holdersOf(GPU1))
                .hasValue("ml/shared");
    }

    @Test
    void aGpuWhoseReplicasWentToTwoContainersOfOnePodIsThatPods() {
        // time-slicing: the device plug-in hands replicas of GPU 1 to the pod's two containers
        kubelet.set(PodResources.newBuilder().setNamespace("ml").setName("shared")
                .addContainers(ContainerResources.newBuilder().setName("ctr0").addDevices(
                        ContainerDevices.newBuilder()
                                .setResourceName("nvidia.com/gpu").addDeviceIds(GPU1.uuid() + "::0")))
                .addContainers(ContainerResources.newBuilder().setName("ctr1").addDevices(
                        ContainerDevices.newBuilder()
                                .setResourceName("nvidia.com/gpu").addDeviceIds(GPU1.uuid() + "::1")))
                .build());
        assertThat(source.ownerOf(GPU1, 4242, List.of()).map(UsageOwner::id))
                .as("GPU 1's replicas all went to one pod (two of its containers): every process on it is that"
                        + " pod's; holders listed: %s", source.holdersOf(GPU1))
                .hasValue("ml/shared");
    }
}
