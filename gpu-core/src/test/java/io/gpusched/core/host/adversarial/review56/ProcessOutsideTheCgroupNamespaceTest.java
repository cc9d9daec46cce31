package io.gpusched.core.host.adversarial.review56;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.MemorySize;
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
 * Review 56. gpusched run in a container has a cgroup namespace of its own (Docker's and containerd's default on
 * cgroup v2): its {@code /sys/fs/cgroup} is the container's cgroup, and {@code /proc/<pid>/cgroup} of a process
 * outside that namespace reads {@code 0::/../../<path>} (cgroup_namespaces(7): paths outside the reader's namespace
 * root start with {@code /..}). AllocationAttribution {@code normalize()}s the line's path, and Java drops a leading
 * {@code ..} of an absolute path: {@code /../../gpusched.jobs/job-a1} becomes {@code /gpusched.jobs/job-a1}, read as
 * {@code /sys/fs/cgroup/gpusched.jobs/job-a1}, allocation a1's job cgroup. A process in another container's (or the
 * host's) cgroup of that relative name, which is not in a1's job cgroup at all, is charged to a1 on a shared GPU: one
 * user's work on another's bill, which the class's rules are written to prevent.
 */
@Tag("adversarial")
class ProcessOutsideTheCgroupNamespaceTest {
    @TempDir
    Path tmp;

    private final GpuDevice gpu = GpuInventories.simulated("dgx1-v100").devices().get(0);

    @Test
    void aCgroupPathAboveTheNamespaceRootIsInNoJobCgroup() throws IOException {
        Path proc = tmp.resolve("proc");
        Path root = tmp.resolve("sys/fs/cgroup");
        Path jobA = Files.createDirectories(root.resolve("gpusched.jobs/job-a1"));
        Path jobB = Files.createDirectories(root.resolve("gpusched.jobs/job-a2"));
        Files.createDirectories(proc.resolve("self"));
        // gpusched's container: cgroup2 mounted at the cgroup root, its namespace root being the container's cgroup
        Files.writeString(proc.resolve("self/mountinfo"),
                "40 30 0:37 / " + root + " rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw,nsdelegate\n");
        // a process of another container on the same (time-sliced) GPU: its cgroup is two levels above gpusched's
        // namespace root, then down into a cgroup that happens to be named like a1's job cgroup
        Path p = Files.createDirectories(proc.resolve("5555"));
        StringBuilder stat = new StringBuilder("5555 (python3) S 1");
        for (int f = 5; f <= 21; f++) {
            stat.append(" 0");
        }
        stat.append(" 88000 0 0\n");
        Files.writeString(p.resolve("stat"), stat.toString());
        Files.writeString(p.resolve("cgroup"), "0::/../../gpusched.jobs/job-a1\n");

        Allocation a1 = shared("a1", jobA);
        Allocation a2 = shared("a2", jobB);
        assertThat(AllocationAttribution.of(proc, root).ownerOf(gpu, 5555, List.of(a1, a2)))
                .as("/proc/5555/cgroup reads 0::/../../gpusched.jobs/job-a1: a cgroup outside gpusched's cgroup"
                        + " namespace, not a1's job cgroup %s; on a shared GPU with two holders no rule ties it to"
                        + " either, so it should be charged to no one, but '/..' was normalized away", jobA)
                .isEmpty();
    }

    private Allocation shared(String id, Path jobCgroup) {
        return new Allocation(id, List.of(gpu), GpuRequest.builder().jobCgroup(jobCgroup.toString())
                .shared(MemorySize.ofGibibytes(4)).build(), Instant.EPOCH);
    }
}
