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
 * Review 58. "The last listed at each mount point (a later mount hides an earlier one)" is applied to mounts at the
 * very same point only. A mount listed later at an ancestor hides every earlier mount below it too: after cgroup2 is
 * mounted over {@code /sys/fs/cgroup}, the v1 devices hierarchy mounted earlier at {@code /sys/fs/cgroup/devices} is
 * out of reach, and {@code /sys/fs/cgroup/devices/...} names cgroup2 cgroups. AllocationAttribution still reads a
 * process's {@code devices} line below that path, so a v1 devices cgroup passes for the cgroup2 cgroup of the same
 * name, and the process is charged to that cgroup2 job's allocation.
 */
@Tag("adversarial")
class V1MountHiddenByACgroup2MountAboveItTest {
    @TempDir
    Path tmp;

    private final GpuDevice gpu = GpuInventories.simulated("dgx1-v100").devices().get(0);

    @Test
    void aV1LineIsNotReadBelowAMountHiddenByALaterMountAboveIt() throws IOException {
        Path proc = tmp.resolve("proc");
        Path root = Files.createDirectories(tmp.resolve("sys/fs/cgroup"));
        Path jobX = Files.createDirectories(root.resolve("devices/jobX")); // cgroup2 cgroup /devices/jobX
        Path other = Files.createDirectories(root.resolve("other")); // cgroup2 cgroup /other
        Files.createDirectories(proc.resolve("self"));
        Files.writeString(proc.resolve("self/mountinfo"),
                "25 24 0:22 / " + root + " rw,nosuid,nodev,noexec shared:9 - tmpfs tmpfs rw,mode=755\n"
                        + "32 25 0:29 / " + root.resolve("devices")
                        + " rw,nosuid,nodev,noexec,relatime shared:16 - cgroup cgroup rw,devices\n"
                        + "60 24 0:40 / " + root
                        + " rw,nosuid,nodev,noexec,relatime shared:30 - cgroup2 cgroup2 rw,nsdelegate\n");
        Path p = Files.createDirectories(proc.resolve("4321"));
        StringBuilder stat = new StringBuilder("4321 (python3) S 1");
        for (int f = 5; f <= 21; f++) {
            stat.append(" 0");
        }
        stat.append(" 77000 0 0\n");
        Files.writeString(p.resolve("stat"), stat.toString());
        Files.writeString(p.resolve("cgroup"), "3:devices:/jobX\n0::/other\n");

        Allocation x = shared("x", jobX);
        Allocation o = shared("o", other);
        assertThat(AllocationAttribution.of(proc, root).ownerOf(gpu, 4321, List.of(x, o)))
                .as("cgroup2, listed last, is mounted over %s and hides the v1 devices hierarchy mounted earlier at"
                        + " %s/devices; the process's cgroup2 cgroup is /other (%s, o's job cgroup), and its v1"
                        + " devices cgroup /jobX is not the cgroup2 cgroup %s (x's): o's expected; the devices line"
                        + " was read below the hidden mount and x (deeper) charged", root, root, other, jobX)
                .contains(UsageOwner.allocation("o"));
    }

    private Allocation shared(String id, Path jobCgroup) {
        return new Allocation(id, List.of(gpu), GpuRequest.builder().jobCgroup(jobCgroup.toString())
                .shared(MemorySize.ofGibibytes(4)).build(), Instant.EPOCH);
    }
}
