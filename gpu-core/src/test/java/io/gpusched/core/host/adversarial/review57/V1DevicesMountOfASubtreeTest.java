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
 * Review 57. Review 56 made AllocationAttribution read a cgroup2 ({@code 0::}) line below the cgroup2 mount's root
 * (a container sharing the host's cgroup namespace mounts a subtree), but only cgroup2: a v1 line
 * ({@code 5:devices:/...}) is still resolved as {@code <cgroup root>/<controller>} + the whole path, and CgroupMounts
 * does not even keep a v1 mount's root. The case review 56 named is a v1 host: Docker's default there is
 * {@code --cgroupns=host}, so gpusched in a container sees {@code /docker/<id> /sys/fs/cgroup/devices ... - cgroup
 * cgroup rw,devices} in mountinfo, gpu-isolation makes job cgroups under its v1 devices mount
 * ({@code /sys/fs/cgroup/devices/gpusched.jobs/job-a1}), and a process in one reads
 * {@code 5:devices:/docker/<id>/gpusched.jobs/job-a1}. Read as {@code /sys/fs/cgroup/devices/docker/<id>/...} it is in
 * no job cgroup, and the job's process on a shared GPU is charged to no one.
 */
@Tag("adversarial")
class V1DevicesMountOfASubtreeTest {
    @TempDir
    Path tmp;

    private final GpuDevice gpu = GpuInventories.simulated("dgx1-v100").devices().get(0);

    @Test
    void aV1LineIsReadAgainstTheDevicesMountsRoot() throws IOException {
        Path proc = tmp.resolve("proc");
        Path root = tmp.resolve("sys/fs/cgroup");
        Path devices = root.resolve("devices");
        Path jobA = Files.createDirectories(devices.resolve("gpusched.jobs/job-a1"));
        Path jobB = Files.createDirectories(devices.resolve("gpusched.jobs/job-a2"));
        Files.createDirectories(proc.resolve("self"));
        String container = "/docker/3f2a9c0d51e7";
        Files.writeString(proc.resolve("self/mountinfo"),
                "30 22 0:27 / " + root + " ro,nosuid,nodev,noexec - tmpfs tmpfs ro,mode=755\n"
                        + "32 30 0:29 " + container + " " + devices + " rw,nosuid,nodev,noexec,relatime - cgroup cgroup"
                        + " rw,devices\n"
                        + "33 30 0:30 " + container + " " + root.resolve("systemd") + " rw,nosuid,nodev,noexec,relatime"
                        + " - cgroup cgroup rw,xattr,name=systemd\n");
        Path p = Files.createDirectories(proc.resolve("4321"));
        StringBuilder stat = new StringBuilder("4321 (python3) S 1");
        for (int f = 5; f <= 21; f++) {
            stat.append(" 0");
        }
        stat.append(" 77000 0 0\n");
        Files.writeString(p.resolve("stat"), stat.toString());
        Files.writeString(p.resolve("cgroup"), "5:devices:" + container + "/gpusched.jobs/job-a1\n"
                + "1:name=systemd:" + container + "\n");

        Allocation a1 = shared("a1", jobA);
        Allocation a2 = shared("a2", jobB);
        assertThat(AllocationAttribution.of(proc, root).ownerOf(gpu, 4321, List.of(a1, a2)))
                .as("the v1 devices hierarchy is mounted at %s showing the cgroup %s (a container sharing the host's"
                        + " cgroup namespace, Docker's default on a v1 host); a process in 5:devices:%s/gpusched.jobs"
                        + "/job-a1 is in %s, a1's job cgroup, so it is a1's; the v1 mount's root is ignored and the"
                        + " line read as %s%s/gpusched.jobs/job-a1 (review56 fixed this for cgroup2 only)",
                        devices, container, container, jobA, devices, container)
                .contains(UsageOwner.allocation("a1"));
    }

    private Allocation shared(String id, Path jobCgroup) {
        return new Allocation(id, List.of(gpu), GpuRequest.builder().jobCgroup(jobCgroup.toString())
                .shared(MemorySize.ofGibibytes(4)).build(), Instant.EPOCH);
    }
}
