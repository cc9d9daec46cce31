package io.gpusched.kubernetes.adversarial.review53;

import static io.gpusched.kubernetes.PodResourcesStandIn.pod;
import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.UsageOwner;
import io.gpusched.kubernetes.PodResourcesAttribution;
import io.gpusched.kubernetes.PodResourcesStandIn;
import io.gpusched.kubernetes.internal.UnixSockets;
import io.gpusched.testing.ManualClock;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review 53: docs/ACCOUNTING.md, Kubernetes: "A GPU assigned to one container: every process on it is that container's
 * (owner POD ...). A GPU several containers share: PodResources cannot tell their processes apart, so none is charged."
 * Under the NVIDIA device plug-in's time-slicing a container that asks for {@code nvidia.com/gpu: 2} may get two
 * replicas of the same GPU ({@code <uuid>::0} and {@code <uuid>::1}; NVIDIA's documentation warns of it, hence its
 * {@code failRequestsGreaterThanOne}). {@code PodResourcesAttribution.ownerOf} counts the kubelet's device entries
 * rather than the containers holding the GPU ({@code holdersOf(device).size() != 1}), so that GPU, held by one
 * container, is taken as shared and none of its processes is charged to the pod.
 */
class OneContainerWithTwoSlicesOfAGpuTest {
    private static final GpuDevice GPU1 = GpuDevice.builder().index(1).uuid("GPU-aaaaaaaa-0000-4000-8000-000000000001")
            .vendor(GpuVendor.NVIDIA).name("GPU").memory(MemorySize.ofGibibytes(80)).pciBusId("00000000:0F:00.0")
            .build();

    @Test
    void aGpuOnlyOneContainerHoldsIsThatContainersEvenAsTwoReplicas(@TempDir Path dir) throws Exception {
        assumeTrue(UnixSockets.available(), () -> "epoll Unix domain sockets unavailable: "
                + UnixSockets.unavailabilityCause());
        Path podResources = Files.createDirectories(dir.resolve("pod-resources"));
        Files.setPosixFilePermissions(podResources, PosixFilePermissions.fromString("rwxr-x---"));
        ManualClock clock = new ManualClock(Instant.parse("2026-03-02T10:00:00Z"));
        try (PodResourcesStandIn kubelet = new PodResourcesStandIn(podResources);
             PodResourcesAttribution source = PodResourcesAttribution.open(podResources, Duration.ofSeconds(10),
                     clock)) {
            kubelet.set(pod("ml", "train-0", "trainer", "nvidia.com/gpu", GPU1.uuid() + "::0",
                    GPU1.uuid() + "::1"));
            assertThat(source.holdersOf(GPU1)).as("the premise: the kubelet lists GPU 1 for train-0/trainer only")
                    .allSatisfy(c -> assertThat(c.pod() + "/" + c.container()).isEqualTo("train-0/trainer"))
                    .isNotEmpty();
            assertThat(source.ownerOf(GPU1, 4242, List.of()).map(UsageOwner::id))
                    .as("GPU 1 is assigned to one container (two time-slicing replicas of it): expected its"
                            + " processes charged to POD ml/train-0; they are charged to no one")
                    .hasValue("ml/train-0");
        }
    }
}
