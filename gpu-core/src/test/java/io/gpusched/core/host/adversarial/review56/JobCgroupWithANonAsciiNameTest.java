package io.gpusched.core.host.adversarial.review56;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.MemorySize;
import io.gpusched.core.UsageOwner;
import io.gpusched.core.host.AllocationAttribution;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review 56. A job cgroup is "an absolute, normalized path of printable characters" (GpuRequest.checkCgroup): a
 * parent the administrator named {@code /sys/fs/cgroup/équipe-ml} (ServiceSettings.withJobCgroupParent) is valid, and
 * the JVM (UTF-8 file names) makes it as the UTF-8 bytes {@code c3 a9}. The kernel writes {@code /proc/<pid>/cgroup}
 * with the directory's bytes, but AllocationAttribution reads that file as ISO-8859-1 (while CgroupMounts reads
 * mountinfo as UTF-8): {@code é} comes back as {@code Ã©}, the path is under no job cgroup, and on a shared GPU the
 * job's own process is charged to no one.
 */
@Tag("adversarial")
class JobCgroupWithANonAsciiNameTest {
    @TempDir
    Path tmp;

    private final GpuDevice gpu = GpuInventories.simulated("dgx1-v100").devices().get(0);

    @Test
    void aProcessInAJobCgroupWhosePathIsNotAsciiIsItsAllocations() throws IOException {
        assumeTrue("UTF-8".equalsIgnoreCase(System.getProperty("sun.jnu.encoding")),
                "file names are UTF-8 here (as on any node with a UTF-8 locale)");
        Path proc = tmp.resolve("proc");
        Path root = tmp.resolve("sys/fs/cgroup");
        Path jobA = Files.createDirectories(root.resolve("\u00e9quipe-ml/job-a1"));
        Path jobB = Files.createDirectories(root.resolve("\u00e9quipe-ml/job-a2"));
        Files.createDirectories(proc.resolve("self"));
        Files.writeString(proc.resolve("self/mountinfo"),
                "40 30 0:37 / " + root + " rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw,nsdelegate\n");
        Path p = Files.createDirectories(proc.resolve("4321"));
        StringBuilder stat = new StringBuilder("4321 (python3) S 1");
        for (int f = 5; f <= 21; f++) {
            stat.append(" 0");
        }
        stat.append(" 77000 0 0\n");
        Files.writeString(p.resolve("stat"), stat.toString());
        // what the kernel writes: the cgroup directory's name as its bytes (UTF-8 here)
        Files.write(p.resolve("cgroup"), "0::/\u00e9quipe-ml/job-a1\n".getBytes(StandardCharsets.UTF_8));

        Allocation a1 = shared("a1", jobA);
        Allocation a2 = shared("a2", jobB);
        assertThat(AllocationAttribution.of(proc, root).ownerOf(gpu, 4321, List.of(a1, a2)))
                .as("a process in 0::/\u00e9quipe-ml/job-a1 is in a1's job cgroup %s, so it is a1's; "
                        + "/proc/<pid>/cgroup was decoded as ISO-8859-1 (\u00c3\u00a9 for \u00e9) and matched no job"
                        + " cgroup", jobA)
                .contains(UsageOwner.allocation("a1"));
    }

    private Allocation shared(String id, Path jobCgroup) {
        return new Allocation(id, List.of(gpu), GpuRequest.builder().jobCgroup(jobCgroup.toString())
                .shared(MemorySize.ofGibibytes(4)).build(), Instant.EPOCH);
    }
}
