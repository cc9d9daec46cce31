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
 * Review 58. On every v1 and hybrid host (systemd) the comma-joined hierarchy {@code cpu,cpuacct} is mounted at
 * {@code /sys/fs/cgroup/cpu,cpuacct} with symlinks {@code cpu} and {@code cpuacct} to it; a job cgroup is commonly
 * named through a symlink ({@code /sys/fs/cgroup/cpu/slurm/...}, {@code /sys/fs/cgroup/cpuacct/...}). Without
 * mountinfo, AllocationAttribution reads a {@code cpu,cpuacct} line below {@code cpu}, {@code cpuacct} and
 * {@code cpu,cpuacct}. With mountinfo (every real host) it reads it below the mount point only, so a process in the
 * job cgroup named {@code .../cpu/slurm/job_1} is in no job cgroup, and on a shared GPU it is charged to no one: the
 * review57 change lost what the layout fallback still does.
 */
@Tag("adversarial")
class V1ControllerNamedThroughItsSymlinkTest {
    @TempDir
    Path tmp;

    private final GpuDevice gpu = GpuInventories.simulated("dgx1-v100").devices().get(0);

    @Test
    void aCpuCpuacctLineMatchesAJobCgroupNamedThroughTheCpuSymlink() throws IOException {
        Path proc = tmp.resolve("proc");
        Path root = Files.createDirectories(tmp.resolve("sys/fs/cgroup"));
        Path joined = Files.createDirectories(root.resolve("cpu,cpuacct"));
        Files.createDirectories(joined.resolve("slurm/job_1"));
        Files.createDirectories(joined.resolve("slurm/job_2"));
        Files.createSymbolicLink(root.resolve("cpu"), Path.of("cpu,cpuacct"));
        Files.createSymbolicLink(root.resolve("cpuacct"), Path.of("cpu,cpuacct"));
        Path devices = Files.createDirectories(root.resolve("devices"));
        Files.createDirectories(proc.resolve("self"));
        Files.writeString(proc.resolve("self/mountinfo"),
                "25 24 0:22 / " + root + " ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755\n"
                        + "26 25 0:23 / " + root.resolve("unified")
                        + " rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate\n"
                        + "27 25 0:24 / " + root.resolve("systemd")
                        + " rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup rw,xattr,name=systemd\n"
                        + "31 25 0:28 / " + joined
                        + " rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,cpu,cpuacct\n"
                        + "32 25 0:29 / " + devices
                        + " rw,nosuid,nodev,noexec,relatime shared:16 - cgroup cgroup rw,devices\n");
        Path p = Files.createDirectories(proc.resolve("4321"));
        StringBuilder stat = new StringBuilder("4321 (python3) S 1");
        for (int f = 5; f <= 21; f++) {
            stat.append(" 0");
        }
        stat.append(" 77000 0 0\n");
        Files.writeString(p.resolve("stat"), stat.toString());
        Files.writeString(p.resolve("cgroup"), "4:devices:/\n3:cpu,cpuacct:/slurm/job_1\n"
                + "1:name=systemd:/system.slice/slurmd.service\n0::/system.slice/slurmd.service\n");

        Path jobA = root.resolve("cpu/slurm/job_1");
        Path jobB = root.resolve("cpu/slurm/job_2");
        assertThat(Files.isSameFile(jobA, joined.resolve("slurm/job_1")))
                .as("precondition: %s is the cgroup directory %s", jobA, joined.resolve("slurm/job_1")).isTrue();
        Allocation a1 = shared("a1", jobA);
        Allocation a2 = shared("a2", jobB);
        assertThat(AllocationAttribution.of(proc, root).ownerOf(gpu, 4321, List.of(a1, a2)))
                .as("a process in 3:cpu,cpuacct:/slurm/job_1 is in %s (the cpu symlink names the cpu,cpuacct"
                        + " hierarchy mounted at %s), a1's job cgroup, so it is a1's; with mountinfo listing the"
                        + " mount the line is read below %s only (no longer below cpu and cpuacct, as without"
                        + " mountinfo) and the process is charged to no one", jobA, joined, joined)
                .contains(UsageOwner.allocation("a1"));
    }

    private Allocation shared(String id, Path jobCgroup) {
        return new Allocation(id, List.of(gpu), GpuRequest.builder().jobCgroup(jobCgroup.toString())
                .shared(MemorySize.ofGibibytes(4)).build(), Instant.EPOCH);
    }
}
