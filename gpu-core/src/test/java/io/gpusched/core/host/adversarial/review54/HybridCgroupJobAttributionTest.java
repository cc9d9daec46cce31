package io.gpusched.core.host.adversarial.review54;

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
 * Review 54. On a hybrid cgroup host (systemd's hybrid layout: the v1 controllers at {@code /sys/fs/cgroup/<c>},
 * cgroup2 at {@code /sys/fs/cgroup/unified}; the development host of docs/ISOLATION.md is one), gpusched's own
 * JobLauncher makes job cgroups at the root of cgroup2: {@code /sys/fs/cgroup/unified/gpusched.jobs/job-<id>}, and that
 * is the allocation's {@code jobCgroup}. A process in it shows {@code 0::/gpusched.jobs/job-<id>} in
 * {@code /proc/<pid>/cgroup}. AllocationAttribution resolves every {@code 0::} line against the cgroup root itself
 * ({@code /sys/fs/cgroup}, hard-coded in {@code host()}), never against where cgroup2 is mounted, so the job's process
 * is under no job cgroup: on a shared GPU it is charged to no holder, though docs/ACCOUNTING.md names "the job's
 * cgroup (GpuRequest.jobCgroup)" as the first rule.
 *
 * <p>The fixture is the layout of such a host under a temporary directory: the v1 and v2 mounts in
 * {@code mountinfo} (of {@code self} and of pid 1), the cgroup directories, and the job's process.
 */
@Tag("adversarial")
class HybridCgroupJobAttributionTest {
    @TempDir
    Path tmp;

    private final GpuDevice gpu = GpuInventories.simulated("dgx1-v100").devices().get(0);

    @Test
    void aJobProcessInItsCgroup2JobCgroupOnAHybridHostIsChargedToItsAllocation() throws IOException {
        Path proc = tmp.resolve("proc");
        Path root = tmp.resolve("sys/fs/cgroup");
        StringBuilder mountinfo =
                new StringBuilder("30 22 0:27 / " + root + " rw,relatime - tmpfs tmpfs rw,mode=755\n");
        String[] v1 = {"cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids"};
        int id = 31;
        for (String c : v1) {
            Files.createDirectories(root.resolve(c).resolve("system.slice/gpusched.service"));
            mountinfo.append(id).append(" 30 0:").append(id - 3).append(" / ").append(root.resolve(c))
                    .append(" rw,relatime - cgroup cgroup rw,").append(c).append('\n');
            id++;
        }
        Files.createDirectories(root.resolve("systemd/system.slice/gpusched.service"));
        mountinfo.append("39 30 0:36 / ").append(root.resolve("systemd"))
                .append(" rw,relatime - cgroup cgroup rw,name=systemd\n");
        Path jobA = Files.createDirectories(root.resolve("unified/gpusched.jobs/job-a1"));
        Path jobB = Files.createDirectories(root.resolve("unified/gpusched.jobs/job-a2"));
        mountinfo.append("40 30 0:37 / ").append(root.resolve("unified"))
                .append(" rw,relatime - cgroup2 cgroup2 rw\n");
        for (String p : List.of("self", "1")) {
            Files.createDirectories(proc.resolve(p));
            Files.writeString(proc.resolve(p).resolve("mountinfo"), mountinfo);
        }
        // the job's process, started by the service (not a descendant of any holder), placed in job-a1's cgroup2
        process(proc, 4321, 1, 77_000, """
                9:name=systemd:/system.slice/gpusched.service
                8:pids:/system.slice/gpusched.service
                7:blkio:/system.slice/gpusched.service
                6:freezer:/system.slice/gpusched.service
                5:devices:/system.slice/gpusched.service
                4:memory:/system.slice/gpusched.service
                3:cpuset:/
                2:cpuacct:/system.slice/gpusched.service
                1:cpu:/system.slice/gpusched.service
                0::/gpusched.jobs/job-a1
                """);
        Files.writeString(jobA.resolve("cgroup.procs"), "4321\n");
        Files.writeString(jobB.resolve("cgroup.procs"), "");

        Allocation a1 = shared("a1", jobA);
        Allocation a2 = shared("a2", jobB);
        AllocationAttribution rule = AllocationAttribution.of(proc, root);
        assertThat(rule.ownerOf(gpu, 4321, List.of(a1, a2)))
                .as("a process whose /proc/<pid>/cgroup says 0::/gpusched.jobs/job-a1, on a host where cgroup2 is"
                        + " mounted at %s: it is in allocation a1's job cgroup %s, so it is a1's (the job-cgroup"
                        + " rule); the 0:: line was resolved against %s instead", root.resolve("unified"), jobA, root)
                .contains(UsageOwner.allocation("a1"));
    }

    private Allocation shared(String id, Path jobCgroup) {
        return new Allocation(id, List.of(gpu), GpuRequest.builder().jobCgroup(jobCgroup.toString())
                .shared(MemorySize.ofGibibytes(4)).build(), Instant.EPOCH);
    }

    private static void process(Path proc, int pid, int ppid, long start, String cgroup) throws IOException {
        Path d = Files.createDirectories(proc.resolve(Integer.toString(pid)));
        StringBuilder stat = new StringBuilder(pid + " (python3) S " + ppid);
        for (int f = 5; f <= 21; f++) {
            stat.append(" 0");
        }
        stat.append(' ').append(start).append(" 0 0\n");
        Files.writeString(d.resolve("stat"), stat.toString());
        Files.writeString(d.resolve("cgroup"), cgroup);
        Files.writeString(d.resolve("mountinfo"), Files.readString(proc.resolve("self/mountinfo")));
    }
}
