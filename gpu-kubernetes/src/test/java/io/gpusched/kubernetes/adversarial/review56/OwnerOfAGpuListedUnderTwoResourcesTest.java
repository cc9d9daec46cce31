package io.gpusched.kubernetes.adversarial.review56;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.UsageOwner;
import io.gpusched.kubernetes.PodResourcesAttribution;
import io.gpusched.kubernetes.PodResourcesStandIn;
import io.gpusched.kubernetes.api.podresources.v1.ContainerDevices;
import io.gpusched.kubernetes.api.podresources.v1.ContainerResources;
import io.gpusched.kubernetes.api.podresources.v1.PodResources;
import io.gpusched.kubernetes.internal.UnixSockets;
import io.gpusched.testing.ManualClock;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review 56. Review 54 made a container that lists one GPU several times its only holder, and
 * {@code PodResourcesAttribution.ownerOf} answers the owner of the FIRST entry, labels included; the label
 * {@code resource} differs between the entries when the container holds the GPU under two resource names (a whole GPU
 * as {@code nvidia.com/gpu} and a time-sliced replica of it as {@code nvidia.com/gpu.shared}). The kubelet lists a
 * container's device-plugin resources by iterating a Go map (devicemanager's per-container {@code map[resource]}), in no
 * fixed order, so the same process on the same GPU is charged to {@code resource=nvidia.com/gpu} on one read and
 * {@code resource=nvidia.com/gpu.shared} on the next: {@code UsageOwner}s that differ (equals, labels) for one
 * container that did not change. The owner should not depend on the order of the kubelet's list.
 */
@Tag("adversarial")
class OwnerOfAGpuListedUnderTwoResourcesTest {
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

    @Test
    void theOwnerOfAProcessDoesNotDependOnTheOrderTheKubeletListsResources() {
        kubelet.set(pod("nvidia.com/gpu", "nvidia.com/gpu.shared"));
        assertThat(source.refreshNow()).isTrue();
        Optional<UsageOwner> first = source.ownerOf(GPU1, 4242, List.of());
        kubelet.set(pod("nvidia.com/gpu.shared", "nvidia.com/gpu"));
        assertThat(source.refreshNow()).isTrue();
        Optional<UsageOwner> second = source.ownerOf(GPU1, 4242, List.of());
        assertThat(first).as("the premise: the one container holding GPU 1 owns its processes: %s",
                source.holdersOf(GPU1)).isPresent();
        assertThat(second)
                .as("the same container (ml/train-0, trainer) holding GPU 1 under the same two resources, listed by the"
                        + " kubelet in the other order: the process's owner should be the same; it was %s, then %s",
                        first, second)
                .isEqualTo(first);
    }

    /** ml/train-0's container trainer, holding GPU 1 whole under one resource and a replica of it under the other. */
    static PodResources pod(String resourceA, String resourceB) {
        return PodResources.newBuilder().setNamespace("ml").setName("train-0").addContainers(ContainerResources
                .newBuilder().setName("trainer")
                .addDevices(ContainerDevices.newBuilder().setResourceName(resourceA).addDeviceIds(id(resourceA)))
                .addDevices(ContainerDevices.newBuilder().setResourceName(resourceB).addDeviceIds(id(resourceB))))
                .build();
    }

    private static String id(String resource) {
        return resource.endsWith(".shared") ? GPU1.uuid() + "::1" : GPU1.uuid();
    }
}
