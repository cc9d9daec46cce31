package io.gpusched.kubernetes;

import static io.gpusched.kubernetes.PodResourcesStandIn.pod;
import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.UsageOwner;
import io.gpusched.kubernetes.PodResourcesAttribution.PodContainer;
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
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * GPUs attributed to pods through the kubelet's PodResources API, driven against {@link PodResourcesStandIn} (gRPC on
 * a real Unix socket, from the kubelet's proto): exclusive and time-sliced GPUs, MIG devices, AMD ids, DRA claims, a
 * kubelet restart (the socket removed and served anew) followed, a kubelet that is down, stale lists dropped.
 */
class PodResourcesAttributionTest {
    @TempDir
    Path dir;
    PodResourcesStandIn kubelet;
    PodResourcesAttribution source;
    final ManualClock clock = new ManualClock(Instant.parse("2026-03-02T10:00:00Z"));

    static final GpuDevice GPU0 =
            gpu(0, "GPU-aaaaaaaa-0000-4000-8000-000000000000", "00000000:07:00.0", GpuVendor.NVIDIA);
    static final GpuDevice GPU1 =
            gpu(1, "GPU-aaaaaaaa-0000-4000-8000-000000000001", "00000000:0F:00.0", GpuVendor.NVIDIA);
    static final GpuDevice MIG = GpuDevice.builder().index(2).uuid("MIG-bbbbbbbb-0000-4000-8000-000000000000")
            .vendor(GpuVendor.NVIDIA).name("A100 MIG 3g.40gb").memory(MemorySize.ofGibibytes(40))
            .pciBusId("00000000:07:00.0").parentUuid(GPU0.uuid()).build();
    static final GpuDevice AMD = gpu(3, "GPU-1000000000000003", "0000:63:00.0", GpuVendor.AMD);

    static GpuDevice gpu(int i, String uuid, String bus, GpuVendor v) {
        return GpuDevice.builder().index(i).uuid(uuid).vendor(v).name("GPU").memory(MemorySize.ofGibibytes(80))
                .pciBusId(bus).build();
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
    void exclusiveGpusArePodsAndEveryProcessOnThemIsTheirs() {
        kubelet.set(pod("ml", "train-0", "trainer", "nvidia.com/gpu", GPU0.uuid()),
                pod("ml", "infer-7", "server", "nvidia.com/mig-3g.40gb", MIG.uuid()),
                pod("amd", "hip-1", "main", "amd.com/gpu", "0000:63:00.0"));
        assertThat(source.ownerOf(GPU0, 4242, List.of())).hasValue(new UsageOwner(UsageOwner.Kind.POD, "ml/train-0",
                Map.of("namespace", "ml", "pod", "train-0", "container", "trainer", "resource", "nvidia.com/gpu")));
        assertThat(source.ownerOf(MIG, 1, List.of()).map(UsageOwner::id)).hasValue("ml/infer-7");
        assertThat(source.ownerOf(AMD, 1, List.of()).map(UsageOwner::id)).hasValue("amd/hip-1");
        assertThat(source.ownerOf(GPU1, 1, List.of())).as("no pod holds GPU 1").isEmpty();
        assertThat(kubelet.lists.get()).as("one List for all of these (refresh every 10 s)").isEqualTo(1);
    }

    @Test
    void timeSlicedGpuListsItsPodsButChargesNoProcessToOne() {
        kubelet.set(pod("a", "p1", "c", "nvidia.com/gpu", GPU1.uuid() + "::0"),
                pod("b", "p2", "c", "nvidia.com/gpu", GPU1.uuid() + "::1"));
        assertThat(source.holdersOf(GPU1)).extracting(PodContainer::pod).containsExactly("p1", "p2");
        assertThat(source.ownerOf(GPU1, 4242, List.of())).as("PodResources cannot tell whose process it is").isEmpty();
    }

    @Test
    void gpuschedFallbackIdsAndDraClaimsNameTheirGpus() {
        kubelet.set(pod("x", "fallback", "c", "nvidia.com/gpu", "gpu-1"),
                PodResources.newBuilder().setNamespace("y").setName("dra").addContainers(ContainerResources.newBuilder()
                        .setName("c").addDynamicResources(DynamicResource.newBuilder().setClaimName("claim")
                                .setClaimNamespace("y").addClaimResources(ClaimResource.newBuilder()
                                        .setDriverName("gpu.nvidia.com").setPoolName("node1").setDeviceName("gpu-9")
                                        .addCdiDevices(
                                                CDIDevice.newBuilder().setName("nvidia.com/gpu=" + GPU0.uuid())))))
                        .build());
        assertThat(source.ownerOf(GPU1, 1, List.of()).map(UsageOwner::id)).hasValue("x/fallback");
        assertThat(source.ownerOf(GPU0, 1, List.of()).map(UsageOwner::id)).hasValue("y/dra");
        assertThat(source.holdersOf(GPU0)).singleElement().extracting(PodContainer::resource)
                .isEqualTo("dra:y/claim");
    }

    @Test
    void idsOfOtherResourcesAndLookAlikesNameNoGpu() {
        kubelet.set(pod("n", "nic", "c", "intel.com/sriov", "gpu-0", "0000:07:00.0"),
                pod("n", "prefix", "c", "nvidia.com/gpu", GPU0.uuid() + "0", "GPU-aaaaaaaa"),
                pod("n", "empty", "c", "nvidia.com/gpu", ""));
        assertThat(source.holdersOf(GPU0)).isEmpty();
    }

    @Test
    void kubeletRestartIsFollowed() throws Exception {
        kubelet.set(pod("ml", "before", "c", "nvidia.com/gpu", GPU0.uuid()));
        assertThat(source.ownerOf(GPU0, 1, List.of()).map(UsageOwner::id)).hasValue("ml/before");
        kubelet.restart(); // kubelet.sock removed and created anew: a socket-file mount would now be dead
        kubelet.set(pod("ml", "after", "c", "nvidia.com/gpu", GPU0.uuid()));
        clock.advance(Duration.ofSeconds(10));
        assertThat(source.ownerOf(GPU0, 1, List.of()).map(UsageOwner::id)).hasValue("ml/after");
        assertThat(source.lastError()).isEmpty();

        kubelet.restart();
        kubelet.set(pod("ml", "third", "c", "nvidia.com/gpu", GPU0.uuid()));
        assertThat(source.refreshNow()).isTrue();
        assertThat(source.ownerOf(GPU0, 1, List.of()).map(UsageOwner::id)).hasValue("ml/third");
    }

    @Test
    void kubeletDownKeepsTheLastListBrieflyThenAttributesNothing() throws Exception {
        kubelet.set(pod("ml", "p", "c", "nvidia.com/gpu", GPU0.uuid()));
        assertThat(source.ownerOf(GPU0, 1, List.of())).isPresent();
        kubelet.stop();
        clock.advance(Duration.ofSeconds(10));
        assertThat(source.ownerOf(GPU0, 1, List.of())).as("the last list, 10 s old").isPresent();
        assertThat(source.lastError()).hasValueSatisfying(e -> assertThat(e).contains("kubelet.sock"));
        clock.advance(Duration.ofSeconds(51));
        assertThat(source.ownerOf(GPU0, 1, List.of())).as("past 6 refreshes: too old to trust").isEmpty();
        kubelet.restart();
        clock.advance(Duration.ofSeconds(10));
        assertThat(source.ownerOf(GPU0, 1, List.of())).as("back once the kubelet answers").isPresent();
    }

    @Test
    void anErrorAnswerIsNotAnEmptyList() {
        kubelet.set(pod("ml", "p", "c", "nvidia.com/gpu", GPU0.uuid()));
        assertThat(source.refreshNow()).isTrue();
        kubelet.failing(true);
        assertThat(source.refreshNow()).isFalse();
        assertThat(source.lastError()).hasValueSatisfying(e -> assertThat(e).contains("INTERNAL"));
        assertThat(source.holdersOf(GPU0)).as("the last good list is kept").hasSize(1);
    }

    @Test
    void pciAddressesCompareWhateverTheDomainWidth() {
        assertThat(PodResourcesAttribution.pciKey("00000000:07:00.0")).hasValue("0000:07:00.0");
        assertThat(PodResourcesAttribution.pciKey("0000:0F:00.0")).hasValue("0000:0f:00.0");
        assertThat(PodResourcesAttribution.pciKey("1:07:00.0")).isEmpty();
        assertThat(PodResourcesAttribution.pciKey("00010000:07:00.0")).isEmpty();
        assertThat(PodResourcesAttribution.pciKey("0000:07:00.8")).isEmpty();
    }
}
