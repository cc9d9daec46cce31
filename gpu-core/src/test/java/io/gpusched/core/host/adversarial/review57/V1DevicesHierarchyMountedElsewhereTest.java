package io.gpusched.core.host.adversarial.review57;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.MemorySize;
import io.gpusched.core.UsageOwner;
import io.gpusched.core.host.AllocationAttribution;
import io.gpusched.core.host.CgroupMounts;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review 57. CgroupMounts became "one home for both" gpu-isolation and AllocationAttribution (review54), but
 * AllocationAttribution uses it for cgroup2 only. gpu-isolation fences a job cgroup anywhere under the v1 devices
 * hierarchy mountinfo lists ({@code CgroupDeviceIsolator}: {@code mounts.v1Devices()}), e.g. {@code /cgroup/devices}
 * where libcgroup's cgconfig mounts it (RHEL/CentOS 6 layout); AllocationAttribution resolves a {@code devices} line
 * against {@code <cgroup root>/devices} whatever mountinfo says, so a process in such a job cgroup is in none, and on a
 * shared GPU it is charged to no one.
 */
@Tag("adversarial")
class V1DevicesHierarchyMountedElsewhereTest {
    @TempDir
    Path tmp;

    private final GpuDevice gpu = GpuInventories.simulated("dgx1-v100").devices().get(0);

    @Test
    void aV1LineIsReadAgainstWhereMountinfoSaysTheDevicesHierarchyIs() throws IOException {
        Path proc = tmp.resolve("proc");
        Path root = Files.createDirectories(tmp.resolve("sys/fs/cgroup"));
        Path devices = tmp.resolve("cgroup/devices");
        Path jobA = Files.createDirectories(devices.resolve("gpusched.jobs/job-a1"));
        Path jobB = Files.createDirectories(devices.resolve("gpusched.jobs/job-a2"));
        Files.createDirectories(proc.resolve("self"));
        Files.writeString(proc.resolve("self/mountinfo"),
                "32 22 0:29 / " + devices + " rw,relatime - cgroup cgroup rw,devices\n"
                        + "33 22 0:30 / " + tmp.resolve("cgroup/memory") + " rw,relatime - cgroup cgroup rw,memory\n");
        assertThat(CgroupMounts.read(proc.resolve("self/mountinfo")).v1Devices())
                .as("precondition: mountinfo lists the v1 devices hierarchy at %s (where gpu-isolation makes job"
                        + " cgroups)", devices)
                .contains(devices);
        Path p = Files.createDirectories(proc.resolve("4321"));
        StringBuilder stat = new StringBuilder("4321 (python3) S 1");
        for (int f = 5; f <= 21; f++) {
            stat.append(" 0");
        }
        stat.append(" 77000 0 0\n");
        Files.writeString(p.resolve("stat"), stat.toString());
        Files.writeString(p.resolve("cgroup"), "4:memory:/\n3:devices:/gpusched.jobs/job-a1\n");

        Allocation a1 = shared("a1", jobA);
        Allocation a2 = shared("a2", jobB);
        assertThat(AllocationAttribution.of(proc, root).ownerOf(gpu, 4321, List.of(a1, a2)))
                .as("mountinfo lists the v1 devices hierarchy at %s; a process in 3:devices:/gpusched.jobs/job-a1 is"
                        + " in %s, a1's job cgroup, so it is a1's; the line was read against %s/devices instead,"
                        + " ignoring mountinfo, and the process charged to no one", devices, jobA, root)
                .contains(UsageOwner.allocation("a1"));
    }

    private Allocation shared(String id, Path jobCgroup) {
        return new Allocation(id, List.of(gpu), GpuRequest.builder().jobCgroup(jobCgroup.toString())
                .shared(MemorySize.ofGibibytes(4)).build(), Instant.EPOCH);
    }
}
