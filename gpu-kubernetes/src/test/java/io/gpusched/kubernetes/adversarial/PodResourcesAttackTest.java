package io.gpusched.kubernetes.adversarial;

import static io.gpusched.kubernetes.PodResourcesStandIn.pod;
import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.kubernetes.PodResourcesAttribution;
import io.gpusched.kubernetes.PodResourcesStandIn;
import io.gpusched.kubernetes.api.podresources.v1.PodResources;
import io.gpusched.kubernetes.internal.UnixSockets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Who may stand in for the kubelet: a pod-resources directory other users may write, a socket owned by another user, a
 * regular file or a link in place of the socket, or a kubelet that answers garbage or floods: none of them decides
 * which pod a GPU's processes are charged to.
 */
@Tag("adversarial")
class PodResourcesAttackTest {
    @TempDir
    Path dir;

    static final GpuDevice GPU = GpuDevice.builder().index(0).uuid("GPU-aaaaaaaa-0000-4000-8000-000000000000")
            .vendor(GpuVendor.NVIDIA).name("A100").memory(MemorySize.ofGibibytes(80)).pciBusId("00000000:07:00.0")
            .build();

    @BeforeEach
    void epoll() {
        assumeTrue(UnixSockets.available(), () -> "epoll Unix sockets unavailable: "
                + UnixSockets.unavailabilityCause());
    }

    Path podResources(String mode) throws Exception {
        Path d = Files.createDirectories(dir.resolve("pod-resources"));
        Files.setPosixFilePermissions(d, PosixFilePermissions.fromString(mode));
        return d;
    }

    @Test
    void aDirectoryOtherUsersMayWriteIsNotTrusted() throws Exception {
        Path d = podResources("rwxrwxrwx");
        try (PodResourcesStandIn fake = new PodResourcesStandIn(d);
             PodResourcesAttribution s = PodResourcesAttribution.open(d, Duration.ofSeconds(10),
                     Clock.systemUTC())) {
            fake.set(pod("evil", "p", "c", "nvidia.com/gpu", GPU.uuid()));
            assertThat(s.ownerOf(GPU, 1, List.of())).isEmpty();
            assertThat(s.lastError()).hasValueSatisfying(e -> assertThat(e).contains("forge"));
            assertThat(fake.lists.get()).as("not even dialled").isZero();
        }
    }

    @Test
    void aSocketOwnedByAnotherUserIsNotTrusted() throws Exception {
        int me = (Integer) Files.getAttribute(Path.of("/proc/self"), "unix:uid");
        assumeTrue(me == 0, "changing a socket's owner needs root");
        Path d = podResources("rwxr-xr-x");
        try (PodResourcesStandIn fake = new PodResourcesStandIn(d);
             PodResourcesAttribution s = PodResourcesAttribution.open(d, Duration.ofSeconds(10),
                     Clock.systemUTC())) {
            fake.set(pod("evil", "p", "c", "nvidia.com/gpu", GPU.uuid()));
            Files.setAttribute(d.resolve("kubelet.sock"), "unix:uid", 54_321);
            assertThat(s.ownerOf(GPU, 1, List.of())).isEmpty();
            assertThat(s.lastError()).hasValueSatisfying(e -> assertThat(e).contains("not a socket owned by root"));
        }
    }

    @Test
    void aFileOrALinkInPlaceOfTheSocketIsNotDialled() throws Exception {
        Path d = podResources("rwxr-xr-x");
        Files.writeString(d.resolve("kubelet.sock"), "not a socket");
        try (PodResourcesAttribution s = PodResourcesAttribution.open(d, Duration.ofSeconds(10), Clock.systemUTC())) {
            assertThat(s.refreshNow()).isFalse();
            Files.delete(d.resolve("kubelet.sock"));
            Path elsewhere = Files.createDirectories(dir.resolve("elsewhere"));
            try (PodResourcesStandIn fake = new PodResourcesStandIn(elsewhere)) {
                fake.set(pod("evil", "p", "c", "nvidia.com/gpu", GPU.uuid()));
                Files.createSymbolicLink(d.resolve("kubelet.sock"), elsewhere.resolve("kubelet.sock"));
                assertThat(s.refreshNow()).as("a link may be pointed anywhere").isFalse();
                assertThat(fake.lists.get()).isZero();
            }
        }
    }

    @Test
    void noSocketAtAllAttributesNothingAndSaysWhy() throws Exception {
        Path d = podResources("rwxr-xr-x");
        try (PodResourcesAttribution s = PodResourcesAttribution.open(d, Duration.ofSeconds(10), Clock.systemUTC())) {
            assertThat(s.ownerOf(GPU, 1, List.of())).isEmpty();
            assertThat(s.lastError()).hasValueSatisfying(e -> assertThat(e).contains("kubelet.sock"));
        }
    }

    @Test
    void aHugeListIsRefusedNotReadWhole() throws Exception {
        Path d = podResources("rwxr-xr-x");
        try (PodResourcesStandIn fake = new PodResourcesStandIn(d);
             PodResourcesAttribution s = PodResourcesAttribution.open(d, Duration.ofSeconds(10),
                     Clock.systemUTC())) {
            // the connection made first, so the list's 2-s deadline is spent on the list, not on connecting
            fake.set(pod("ns", "small", "c", "nvidia.com/gpu", GPU.uuid()));
            assertThat(s.refreshNow()).isTrue();
            String id = "x".repeat(1 << 20);
            PodResources[] pods = new PodResources[20];
            for (int i = 0; i < pods.length; i++) {
                pods[i] = pod("ns", "p" + i, "c", "nvidia.com/gpu", id);
            }
            fake.set(pods);
            assertThat(s.refreshNow()).as("20 MiB, past the 16-MiB limit").isFalse();
            assertThat(s.lastError()).hasValueSatisfying(e -> assertThat(e).containsIgnoringCase("RESOURCE_EXHAUSTED"));
            fake.set(pod("ns", "small", "c", "nvidia.com/gpu", GPU.uuid()));
            assertThat(s.refreshNow()).isTrue();
            assertThat(s.holdersOf(GPU)).hasSize(1);
        }
    }
}
