package io.gpusched.core.host.adversarial.review56;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.MemorySize;
import io.gpusched.core.UsageOwner;
import io.gpusched.core.host.AllocationAttribution;
import io.gpusched.core.host.CgroupMounts;
import java.io.ByteArrayOutputStream;
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
 * Review 56. {@link CgroupMounts#read} reads {@code mountinfo} with {@code Files.readAllLines}, which decodes UTF-8 and
 * throws {@code MalformedInputException} on any byte sequence that is not UTF-8. A mount point is a file name: any
 * bytes but NUL, and the kernel escapes only space, tab, newline and backslash in mountinfo. One mount anywhere on the
 * node whose path is not UTF-8 (a USB stick or an NFS export whose directory name is Latin-1: {@code /media/u/Caf\xe9})
 * makes the whole file "unreadable": no cgroup2 mount and no v1 devices hierarchy. On a hybrid host
 * AllocationAttribution then resolves {@code 0::} lines against the cgroup root again (review54's defect back) and a
 * job's process in its cgroup2 job cgroup is charged to no one; gpu-isolation loses the devices hierarchy too.
 */
@Tag("adversarial")
class MountinfoWithANonUtf8MountPointTest {
    @TempDir
    Path tmp;

    private final GpuDevice gpu = GpuInventories.simulated("dgx1-v100").devices().get(0);

    @Test
    void aLatin1MountPointElsewhereDoesNotHideTheCgroupMounts() throws IOException {
        Path root = tmp.resolve("sys/fs/cgroup");
        Path mountinfo = tmp.resolve("mountinfo");
        Files.write(mountinfo, hybridMountinfo(root));
        CgroupMounts m = CgroupMounts.read(mountinfo);
        assertThat(m.v2())
                .as("mountinfo lists cgroup2 at %s; a USB stick mounted at a Latin-1 path (byte 0xE9) on another line"
                        + " should not make the cgroup2 mount unknown", root.resolve("unified"))
                .contains(root.resolve("unified"));
        assertThat(m.v1Devices())
                .as("mountinfo lists the v1 devices hierarchy at %s", root.resolve("devices"))
                .contains(root.resolve("devices"));
    }

    @Test
    void aJobProcessOnAHybridHostWithALatin1MountIsChargedToItsAllocation() throws IOException {
        Path proc = tmp.resolve("proc");
        Path root = tmp.resolve("sys/fs/cgroup");
        Path jobA = Files.createDirectories(root.resolve("unified/gpusched.jobs/job-a1"));
        Path jobB = Files.createDirectories(root.resolve("unified/gpusched.jobs/job-a2"));
        Files.createDirectories(proc.resolve("self"));
        Files.write(proc.resolve("self/mountinfo"), hybridMountinfo(root));
        Path p = Files.createDirectories(proc.resolve("4321"));
        StringBuilder stat = new StringBuilder("4321 (python3) S 1");
        for (int f = 5; f <= 21; f++) {
            stat.append(" 0");
        }
        stat.append(" 77000 0 0\n");
        Files.writeString(p.resolve("stat"), stat.toString());
        Files.writeString(p.resolve("cgroup"), """
                5:devices:/system.slice/gpusched.service
                1:name=systemd:/system.slice/gpusched.service
                0::/gpusched.jobs/job-a1
                """);
        Allocation a1 = shared("a1", jobA);
        Allocation a2 = shared("a2", jobB);
        assertThat(AllocationAttribution.of(proc, root).ownerOf(gpu, 4321, List.of(a1, a2)))
                .as("a process in 0::/gpusched.jobs/job-a1 on a hybrid host (cgroup2 at %s) is in a1's job cgroup %s;"
                        + " one Latin-1 mount point in mountinfo made the cgroup2 mount unknown, so the line was read"
                        + " against %s and the process charged to no one", root.resolve("unified"), jobA, root)
                .contains(UsageOwner.allocation("a1"));
    }

    private static byte[] hybridMountinfo(Path root) throws IOException {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        b.write(("30 22 0:27 / " + root + " rw,relatime - tmpfs tmpfs rw,mode=755\n").getBytes(StandardCharsets.UTF_8));
        // a USB stick whose directory name is Latin-1 ("Café" as ISO-8859-1: 0xE9), listed before the cgroup mounts
        b.write("31 22 8:17 / /media/u/Caf".getBytes(StandardCharsets.UTF_8));
        b.write(0xE9);
        b.write(" rw,nosuid,nodev,relatime - vfat /dev/sdb1 rw,fmask=0022\n".getBytes(StandardCharsets.UTF_8));
        b.write(("32 30 0:29 / " + root.resolve("devices") + " rw,relatime - cgroup cgroup rw,devices\n")
                .getBytes(StandardCharsets.UTF_8));
        b.write(("33 30 0:30 / " + root.resolve("systemd") + " rw,relatime - cgroup cgroup rw,name=systemd\n")
                .getBytes(StandardCharsets.UTF_8));
        b.write(("34 30 0:31 / " + root.resolve("unified") + " rw,relatime - cgroup2 cgroup2 rw\n")
                .getBytes(StandardCharsets.UTF_8));
        return b.toByteArray();
    }

    private Allocation shared(String id, Path jobCgroup) {
        return new Allocation(id, List.of(gpu), GpuRequest.builder().jobCgroup(jobCgroup.toString())
                .shared(MemorySize.ofGibibytes(4)).build(), Instant.EPOCH);
    }
}
