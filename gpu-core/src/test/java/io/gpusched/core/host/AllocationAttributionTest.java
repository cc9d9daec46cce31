package io.gpusched.core.host;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.HolderProcess;
import io.gpusched.core.MemorySize;
import io.gpusched.core.ProcessAttribution;
import io.gpusched.core.UsageOwner;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The cgroup, holder and exclusive rules, over fixture /proc trees. */
class AllocationAttributionTest {
    @TempDir
    Path tmp;

    private final GpuDevice gpu = GpuInventories.simulated("dgx1-v100").devices().get(0);

    private void proc(int pid, int ppid, long start, String cgroup) throws IOException {
        Path d = Files.createDirectories(tmp.resolve("proc").resolve(Integer.toString(pid)));
        StringBuilder stat = new StringBuilder(pid + " (evil) name) S " + ppid);
        for (int f = 5; f <= 21; f++) {
            stat.append(" 0");
        }
        stat.append(' ').append(start).append(" 0 0\n");
        Files.writeString(d.resolve("stat"), stat.toString());
        Files.writeString(d.resolve("cgroup"), cgroup);
    }

    private Allocation shared(String id, GpuRequest.Builder r) {
        return new Allocation(id, List.of(gpu), r.shared(MemorySize.ofGibibytes(4)).build(), Instant.EPOCH);
    }

    @Test
    void cgroupThenHolderLineageThenTheOnlyExclusiveHolder() throws IOException {
        proc(100, 1, 500, "0::/user.slice/alice\n");
        proc(200, 100, 600, "0::/gpusched.jobs/job-a/inner\n");
        proc(300, 100, 700, "0::/user.slice/alice\n");
        proc(400, 1, 800, "12:devices:/gpusched.jobs/job-b\n0::/elsewhere\n");
        proc(500, 1, 900, "0::/gpusched.jobs/job-ab\n");
        AllocationAttribution rule = AllocationAttribution.of(tmp.resolve("proc"), Path.of("/sys/fs/cgroup"));
        Allocation a = shared("n-1", GpuRequest.builder().jobCgroup("/sys/fs/cgroup/gpusched.jobs/job-a"));
        Allocation b = shared("n-2", GpuRequest.builder().jobCgroup("/sys/fs/cgroup/devices/gpusched.jobs/job-b"));
        Allocation h = shared("n-3", GpuRequest.builder().holder(new HolderProcess(100, 500)));
        List<Allocation> holders = List.of(a, b, h);
        assertThat(rule.ownerOf(gpu, 200, holders)).contains(UsageOwner.allocation("n-1"));
        assertThat(rule.ownerOf(gpu, 400, holders)).as("cgroup v1 controller path").contains(UsageOwner.allocation(
                "n-2"));
        assertThat(rule.ownerOf(gpu, 300, holders)).as("child of the holder").contains(UsageOwner.allocation("n-3"));
        assertThat(rule.ownerOf(gpu, 100, holders)).as("the holder itself").contains(UsageOwner.allocation("n-3"));
        assertThat(rule.ownerOf(gpu, 500, holders)).as("job-ab is not below job-a").isEmpty();
        assertThat(rule.ownerOf(gpu, 999, holders)).as("no such process").isEmpty();
        // the holder's pid reused by another process (another start time): not the holder
        Allocation stale = shared("n-4", GpuRequest.builder().holder(new HolderProcess(100, 499)));
        assertThat(rule.ownerOf(gpu, 300, List.of(stale))).isEmpty();
        Allocation excl = new Allocation("n-5", List.of(gpu), GpuRequest.builder().build(), Instant.EPOCH);
        assertThat(rule.ownerOf(gpu, 999, List.of(excl))).contains(UsageOwner.allocation("n-5"));
        assertThat(rule.ownerOf(gpu, 999, List.of())).isEmpty();
        assertThat(rule.orElse((d, p, hs) -> Optional.of(new UsageOwner(UsageOwner.Kind.SLURM_JOB, "77",
                Map.of()))).ownerOf(gpu, 500, holders)).map(UsageOwner::id).contains("77");
    }

    /** A process's incarnation is its start time: a pid another process took has another; no process, NO_PROCESS. */
    @Test
    void theIncarnationOfAPidIsItsProcesssStartTime() throws IOException {
        AllocationAttribution rule = AllocationAttribution.of(tmp.resolve("proc"), tmp.resolve("cgroup"));
        proc(500, 1, 4242, "0::/user.slice\n");
        assertThat(rule.incarnation(500)).hasValue(4242);
        proc(500, 1, 9999, "0::/user.slice\n"); // the pid freed and taken by another process
        assertThat(rule.incarnation(500)).hasValue(9999);
        assertThat(rule.incarnation(501)).hasValue(ProcessAttribution.NO_PROCESS);
        assertThat(rule.orElse((d, p, hs) -> Optional.empty()).incarnation(500)).as("through orElse").hasValue(9999);
        assertThat(((ProcessAttribution) (d, p, hs) -> Optional.empty()).orElse(rule).incarnation(500))
                .as("a source that cannot tell, then the rule").hasValue(9999);
    }
}
