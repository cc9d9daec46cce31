package io.gpusched.core.host.adversarial.review56;

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
 * Review 56. Review 54 made AllocationAttribution read a {@code 0::} line "against where cgroup2 is mounted", but it
 * takes only the mount point from mountinfo and drops the mount's root (field 4: the cgroup shown at the mount point).
 * gpusched in a container that shares the host's cgroup namespace (Docker's {@code --cgroupns=host}, its default on a
 * cgroup v1/hybrid host; a privileged pod) sees its own cgroup at {@code /sys/fs/cgroup}: mountinfo says
 * {@code /docker/<id> /sys/fs/cgroup ... - cgroup2}. It makes job cgroups there
 * ({@code /sys/fs/cgroup/gpusched.jobs/job-a1}), and a process in one reads
 * {@code 0::/docker/<id>/gpusched.jobs/job-a1} in {@code /proc/<pid>/cgroup}: the path from the hierarchy's root, of
 * which the mount shows the part below {@code /docker/<id>}. Resolved as mount point + whole path
 * ({@code /sys/fs/cgroup/docker/<id>/gpusched.jobs/job-a1}) it is in no job cgroup, and the job's process on a shared
 * GPU is charged to no one.
 */
@Tag("adversarial")
class Cgroup2MountOfASubtreeTest {
    @TempDir
    Path tmp;

    private final GpuDevice gpu = GpuInventories.simulated("dgx1-v100").devices().get(0);

    @Test
    void aLineIsReadAgainstTheMountsRootNotOnlyItsMountPoint() throws IOException {
        Path proc = tmp.resolve("proc");
        Path root = tmp.resolve("sys/fs/cgroup");
        Path jobA = Files.createDirectories(root.resolve("gpusched.jobs/job-a1"));
        Path jobB = Files.createDirectories(root.resolve("gpusched.jobs/job-a2"));
        Files.createDirectories(proc.resolve("self"));
        String container = "/docker/3f2a9c0d51e7";
        Files.writeString(proc.resolve("self/mountinfo"), "40 30 0:37 " + container + " " + root
                + " rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw\n");
        Path p = Files.createDirectories(proc.resolve("4321"));
        StringBuilder stat = new StringBuilder("4321 (python3) S 1");
        for (int f = 5; f <= 21; f++) {
            stat.append(" 0");
        }
        stat.append(" 77000 0 0\n");
        Files.writeString(p.resolve("stat"), stat.toString());
        Files.writeString(p.resolve("cgroup"), "0::" + container + "/gpusched.jobs/job-a1\n");

        Allocation a1 = shared("a1", jobA);
        Allocation a2 = shared("a2", jobB);
        assertThat(AllocationAttribution.of(proc, root).ownerOf(gpu, 4321, List.of(a1, a2)))
                .as("cgroup2 is mounted at %s showing the cgroup %s; a process in 0::%s/gpusched.jobs/job-a1 is in"
                        + " %s, a1's job cgroup, so it is a1's; the mount's root was ignored and the line read as"
                        + " %s%s/gpusched.jobs/job-a1", root, container, container, jobA, root, container)
                .contains(UsageOwner.allocation("a1"));
    }

    private Allocation shared(String id, Path jobCgroup) {
        return new Allocation(id, List.of(gpu), GpuRequest.builder().jobCgroup(jobCgroup.toString())
                .shared(MemorySize.ofGibibytes(4)).build(), Instant.EPOCH);
    }
}
