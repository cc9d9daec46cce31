package io.gpusched.kubernetes.adversarial.review54;

import static io.gpusched.kubernetes.PodResourcesStandIn.pod;
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
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review 54. docs/ACCOUNTING.md: "A GPU assigned to one container: every process on it is that container's"; only "a
 * GPU several containers share" is charged to no one. PodResourcesAttribution counts device ids, not containers:
 * <ul>
 *   <li>under time-slicing a container that asks for two {@code nvidia.com/gpu} replicas can get two replicas of the
 *       same GPU ({@code <uuid>::0} and {@code <uuid>::3}): NVIDIA's plug-in warns of it (its
 *       {@code failRequestsGreaterThanOne}), and gpusched's own plug-in serves such an Allocate
 *       (KubeletProtocolTest.timeSlicingAdvertisesReplicasAndSpreadsThem: {@code u0::0} and {@code u0::2} to one
 *       container). One container holds the GPU, yet {@code holdersOf} lists it twice and {@code ownerOf} charges its
 *       processes to no one;</li>
 *   <li>whether a DRA claim's device name {@code gpu-<index>} names a GPU depends on the name the user gave the claim
 *       (the resource is {@code dra:<namespace>/<claim>}, and {@code gpu-<index>} counts only for a resource whose name
 *       holds "gpu"): a claim of GPU 1 (device {@code gpu-1}, CDI device {@code nvidia.com/gpu=<uuid of GPU 1>}) named
 *       {@code train} makes its container GPU 1's holder; named {@code train-gpus}, the container is listed twice and
 *       its processes are charged to no one.</li>
 * </ul>
 */
@Tag("adversarial")
class OneContainerHoldingAGpuTwiceTest {
    @TempDir
    Path dir;
    PodResourcesStandIn kubelet;
    PodResourcesAttribution source;
    final ManualClock clock = new ManualClock(Instant.parse("2026-03-02T10:00:00Z"));

    static final GpuDevice GPU1 = gpu(1, "GPU-aaaaaaaa-0000-4000-8000-000000000001", "00000000:0F:00.0");

    static GpuDevice gpu(int i, String uuid, String bus) {
        return GpuDevice.builder().index(i).uuid(uuid).vendor(GpuVendor.NVIDIA).name("A100")
                .memory(MemorySize.ofGibibytes(80)).pciBusId(bus).build();
    }

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

    @Test
    void aContainerGivenTwoTimeSlicedReplicasOfOneGpuIsItsOnlyHolder() {
        kubelet.set(pod("ml", "train-0", "trainer", "nvidia.com/gpu", GPU1.uuid() + "::0", GPU1.uuid() + "::3"));
        assertThat(source.ownerOf(GPU1, 4242, List.of()).map(UsageOwner::id))
                .as("GPU 1 is assigned to one container only (two replicas of it): every process on it is that"
                        + " container's (docs/ACCOUNTING.md); holders listed: %s", source.holdersOf(GPU1))
                .hasValue("ml/train-0");
    }

    @Test
    void aDraClaimOfOneGpuIsItsContainersWhateverTheUserNamedTheClaim() {
        for (String claim : List.of("train", "train-gpus")) {
            // the claim's device gpu-1 and its CDI device, both GPU 1
            kubelet.set(draPod("ml", claim));
            assertThat(source.refreshNow()).isTrue();
            assertThat(source.ownerOf(GPU1, 4242, List.of()).map(UsageOwner::id))
                    .as("GPU 1 is assigned to one container (ml/p, claim '%s'): every process on it is that"
                            + " container's, whatever the user named the claim; holders listed: %s", claim,
                            source.holdersOf(GPU1))
                    .hasValue("ml/p");
        }
    }

    static PodResources draPod(String namespace, String claim) {
        return PodResources.newBuilder().setNamespace(namespace).setName("p").addContainers(ContainerResources
                .newBuilder().setName("c").addDynamicResources(DynamicResource.newBuilder().setClaimName(claim)
                        .setClaimNamespace(namespace).addClaimResources(ClaimResource.newBuilder()
                                .setDriverName("gpu.nvidia.com").setPoolName("node1").setDeviceName("gpu-1")
                                .addCdiDevices(CDIDevice.newBuilder().setName("nvidia.com/gpu=" + GPU1.uuid())))))
                .build();
    }
}
