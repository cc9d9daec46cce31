package io.gpusched.core.host.adversarial.review57;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.MemorySize;
import io.gpusched.core.UsageOwner;
import io.gpusched.core.host.AllocationAttribution;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review 57. gpusched in a container with a cgroup namespace of its own (Docker's and containerd's default on cgroup
 * v2) that is given the host's cgroup2 hierarchy ({@code -v /sys/fs/cgroup:/sys/fs/cgroup}, as cAdvisor-style agents
 * and systemd containers are): the mount's root, shown relative to gpusched's namespace root, is {@code /../..}
 * (cgroup_namespaces(7)), and a host process in the job cgroup {@code /gpusched.jobs/job-a1} reads
 * {@code 0::/../../gpusched.jobs/job-a1}. That path is below the mount's root: it is
 * {@code /sys/fs/cgroup/gpusched.jobs/job-a1}, a1's job cgroup. Review 56's rule "a path with a {@code ..} segment is
 * outside the namespace, so no job's" runs before the mount's root is considered, so it is charged to no one.
 * The second method is the mount table as Docker makes it: its own cgroup2 mount at /sys/fs/cgroup (root {@code /})
 * first, the bind of the host's over it (root {@code /../..}) after; the later mount at one mount point is the one
 * seen there, but CgroupMounts keeps "the first of each", the hidden one.
 */
@Tag("adversarial")
class HostHierarchyMountedInAPrivateCgroupNamespaceTest {
    @TempDir
    Path tmp;

    private final GpuDevice gpu = GpuInventories.simulated("dgx1-v100").devices().get(0);

    @Test
    void aPathAboveTheNamespaceRootButBelowTheMountsRootIsReadBelowTheMount() throws IOException {
        Path root = tmp.resolve("sys/fs/cgroup");
        String mountinfo = "41 30 0:26 /../.. " + root + " rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2"
                + " rw,nsdelegate\n";
        assertOwnedByA1(root, mountinfo);
    }

    @Test
    void theHostsHierarchyBoundOverTheContainersOwnIsTheOneRead() throws IOException {
        Path root = tmp.resolve("sys/fs/cgroup");
        String mountinfo = "40 30 0:26 / " + root + " ro,nosuid,nodev,noexec,relatime - cgroup2 cgroup ro,nsdelegate\n"
                + "41 40 0:26 /../.. " + root + " rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw,nsdelegate\n";
        assertOwnedByA1(root, mountinfo);
    }

    private void assertOwnedByA1(Path root, String mountinfo) throws IOException {
        Path proc = tmp.resolve("proc");
        Path jobA = Files.createDirectories(root.resolve("gpusched.jobs/job-a1"));
        Path jobB = Files.createDirectories(root.resolve("gpusched.jobs/job-a2"));
        Files.createDirectories(proc.resolve("self"));
        Files.writeString(proc.resolve("self/mountinfo"), mountinfo);
        Path p = Files.createDirectories(proc.resolve("4321"));
        StringBuilder stat = new StringBuilder("4321 (python3) S 1");
        for (int f = 5; f <= 21; f++) {
            stat.append(" 0");
        }
        stat.append(" 77000 0 0\n");
        Files.writeString(p.resolve("stat"), stat.toString());
        Files.writeString(p.resolve("cgroup"), "0::/../../gpusched.jobs/job-a1\n");

        Allocation a1 = shared("a1", jobA);
        Allocation a2 = shared("a2", jobB);
        assertThat(AllocationAttribution.of(proc, root).ownerOf(gpu, 4321, List.of(a1, a2)))
                .as("mountinfo:%n%sthe cgroup2 hierarchy seen at %s is mounted from /../.. (relative to gpusched's"
                        + " cgroup namespace); a process in 0::/../../gpusched.jobs/job-a1 is in %s, a1's job cgroup,"
                        + " so it is a1's; it was charged to no one", mountinfo, root, jobA)
                .contains(UsageOwner.allocation("a1"));
    }

    private Allocation shared(String id, Path jobCgroup) {
        return new Allocation(id, List.of(gpu), GpuRequest.builder().jobCgroup(jobCgroup.toString())
                .shared(MemorySize.ofGibibytes(4)).build(), Instant.EPOCH);
    }
}
