package io.gpusched.core.host.adversarial.review58;

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
 * Review 58. Since review57 a cgroup path is read below every mount of its hierarchy, bind mounts of a cgroup
 * directory elsewhere included, so one cgroup has several file-system names. "The deepest job cgroup wins where they
 * nest" is still decided by the number of names in the job cgroup's file-system path
 * ({@code Path.getNameCount()}), not by its depth in the hierarchy: an inner job cgroup named through a short bind
 * mount loses to the outer one named through the long {@code /sys/fs/cgroup} path.
 */
@Tag("adversarial")
class NestedJobCgroupsNamedThroughABindMountTest {
    @TempDir
    Path tmp;

    private final GpuDevice gpu = GpuInventories.simulated("dgx1-v100").devices().get(0);

    @Test
    void theInnerJobCgroupWinsWhateverMountNamesIt() throws IOException {
        Path proc = tmp.resolve("proc");
        Path root = Files.createDirectories(tmp.resolve("sys/fs/cgroup"));
        Path pod = Files.createDirectories(root.resolve("kubepods/pod1"));
        Files.createDirectories(pod.resolve("ctr"));
        Path bind = Files.createDirectories(tmp.resolve("p1"));
        Files.createDirectories(proc.resolve("self"));
        Files.writeString(proc.resolve("self/mountinfo"),
                "30 24 0:26 / " + root + " rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw\n"
                        + "41 24 0:26 /kubepods/pod1 " + bind
                        + " rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw\n");
        Path p = Files.createDirectories(proc.resolve("4321"));
        StringBuilder stat = new StringBuilder("4321 (python3) S 1");
        for (int f = 5; f <= 21; f++) {
            stat.append(" 0");
        }
        stat.append(" 77000 0 0\n");
        Files.writeString(p.resolve("stat"), stat.toString());
        Files.writeString(p.resolve("cgroup"), "0::/kubepods/pod1/ctr\n");

        Allocation outer = shared("pod", pod); // the pod's cgroup /kubepods/pod1
        Allocation inner = shared("ctr", bind.resolve("ctr")); // the container's cgroup /kubepods/pod1/ctr
        assertThat(AllocationAttribution.of(proc, root).ownerOf(gpu, 4321, List.of(outer, inner)))
                .as("a process in 0::/kubepods/pod1/ctr is in job cgroup %s (cgroup /kubepods/pod1/ctr, through the"
                        + " bind mount of /kubepods/pod1 at %s), nested in job cgroup %s (cgroup /kubepods/pod1):"
                        + " the deepest job cgroup, ctr's, wins; the depth was counted in path names, and the"
                        + " pod's longer path won", bind.resolve("ctr"), bind, pod)
                .contains(UsageOwner.allocation("ctr"));
    }

    @Test
    void oneCgroupNamedThroughTwoMountsForTwoAllocationsChargesNeither() throws IOException {
        Path proc = tmp.resolve("proc");
        Path root = Files.createDirectories(tmp.resolve("sys/fs/cgroup"));
        Path pod = Files.createDirectories(root.resolve("kubepods/pod1"));
        Path bind = Files.createDirectories(tmp.resolve("p1"));
        Files.createDirectories(proc.resolve("self"));
        Files.writeString(proc.resolve("self/mountinfo"),
                "30 24 0:26 / " + root + " rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw\n"
                        + "41 24 0:26 /kubepods/pod1 " + bind
                        + " rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw\n");
        Path p = Files.createDirectories(proc.resolve("4321"));
        StringBuilder stat = new StringBuilder("4321 (python3) S 1");
        for (int f = 5; f <= 21; f++) {
            stat.append(" 0");
        }
        stat.append(" 77000 0 0\n");
        Files.writeString(p.resolve("stat"), stat.toString());
        Files.writeString(p.resolve("cgroup"), "0::/kubepods/pod1\n");

        Allocation a1 = shared("a1", pod); // cgroup /kubepods/pod1
        Allocation a2 = shared("a2", bind); // the same cgroup, through its bind mount
        assertThat(AllocationAttribution.of(proc, root).ownerOf(gpu, 4321, List.of(a1, a2)))
                .as("%s and %s are one cgroup (/kubepods/pod1, the second through its bind mount), the job cgroup of"
                        + " both a1 and a2: one job cgroup for two allocations charges neither (review54); a1 was"
                        + " charged because its path has more names", pod, bind)
                .isEmpty();
    }

    private Allocation shared(String id, Path jobCgroup) {
        return new Allocation(id, List.of(gpu), GpuRequest.builder().jobCgroup(jobCgroup.toString())
                .shared(MemorySize.ofGibibytes(4)).build(), Instant.EPOCH);
    }
}
