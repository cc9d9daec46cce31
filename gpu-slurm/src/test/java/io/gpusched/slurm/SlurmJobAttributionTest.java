package io.gpusched.slurm;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.ProcessAttribution;
import io.gpusched.core.UsageOwner;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Slurm jobs from {@code /proc/<pid>/cgroup} over fixture trees with the files Slurm's cgroup plugins leave: cgroup v1
 * (one line per controller, Slurm's under {@code /slurm/uid_<uid>/job_<id>/step_<step>}), cgroup v2 (one line, under
 * {@code slurmstepd.scope}), multiple slurmd, batch and extern steps, a job cgroup being removed, and processes in no
 * job.
 */
class SlurmJobAttributionTest {
    @TempDir
    Path proc;

    static final GpuDevice GPU = GpuDevice.builder().index(0).uuid("GPU-0").vendor(GpuVendor.NVIDIA).name("A100")
            .memory(MemorySize.ofGibibytes(40)).pciBusId("00000000:07:00.0").build();

    /** CentOS 7, Slurm 20.11, task/cgroup and proctrack/cgroup (cgroup v1). */
    static final String V1_STEP0 = """
            11:cpuset:/slurm/uid_1000/job_4567/step_0
            10:memory:/slurm/uid_1000/job_4567/step_0/task_0
            9:devices:/slurm/uid_1000/job_4567/step_0
            8:freezer:/slurm/uid_1000/job_4567/step_0
            7:blkio:/system.slice/slurmd.service
            6:net_prio,net_cls:/
            5:perf_event:/
            4:hugetlb:/
            3:pids:/system.slice/slurmd.service
            2:cpuacct,cpu:/system.slice/slurmd.service
            1:name=systemd:/system.slice/slurmd.service
            """;
    /** Ubuntu 22.04, Slurm 23.02, cgroup/v2. */
    static final String V2_STEP0 = "0::/system.slice/slurmstepd.scope/job_89/step_0/user/task_0\n";

    void write(int pid, String cgroup) throws IOException {
        Path d = Files.createDirectories(proc.resolve(Integer.toString(pid)));
        Files.writeString(d.resolve("cgroup"), cgroup);
    }

    SlurmJobAttribution source;

    @BeforeEach
    void source() {
        source = SlurmJobAttribution.of(proc);
    }

    @Test
    void cgroupV1StepWithUidFromTheControllersSlurmUses() throws IOException {
        write(100, V1_STEP0);
        assertThat(source.jobOf(100)).hasValue(new SlurmJobStep(4567, Optional.of("0"), OptionalLong.of(1000), 1));
        // the process's owner is taken only where it is the uid the path names (a test run as uid 1000 has it)
        Path p100 = proc.resolve("100");
        Map<String, String> labels = Files.getAttribute(p100, "unix:uid").equals(1000)
                ? Map.of("step", "0", "uid", "1000", "cgroup", "v1", "user", Files.getOwner(p100).getName())
                : Map.of("step", "0", "uid", "1000", "cgroup", "v1");
        assertThat(source.ownerOf(GPU, 100, List.of())).hasValue(new UsageOwner(UsageOwner.Kind.SLURM_JOB, "4567",
                labels));
    }

    @Test
    void cgroupV2StepsBatchExternAndMultipleSlurmd() throws IOException {
        write(200, V2_STEP0);
        write(201, "0::/system.slice/slurmstepd.scope/job_89/step_batch/user/task_0\n");
        write(202, "0::/system.slice/slurmstepd.scope/job_89/step_extern/user/task_special\n");
        write(203, "0::/system.slice/node7_slurmstepd.scope/job_4294967294/step_12.1/user/task_3\n");
        write(204, "0::/slurmstepd.scope/job_17/step_interactive/user/task_0\n"); // in a cgroup namespace
        write(205, "0::/system.slice/slurmstepd.scope/job_90\n"); // the job's own cgroup: no step
        assertThat(source.jobOf(200)).hasValue(new SlurmJobStep(89, Optional.of("0"), OptionalLong.empty(), 2));
        assertThat(source.jobOf(201).map(SlurmJobStep::step)).hasValue(Optional.of("batch"));
        assertThat(source.jobOf(202).map(SlurmJobStep::step)).hasValue(Optional.of("extern"));
        assertThat(source.jobOf(203)).hasValue(new SlurmJobStep(4294967294L, Optional.of("12.1"),
                OptionalLong.empty(), 2));
        assertThat(source.jobOf(204).map(SlurmJobStep::jobId)).hasValue(17L);
        assertThat(source.jobOf(205)).hasValue(new SlurmJobStep(90, Optional.empty(), OptionalLong.empty(), 2));
        // a v2 path names no uid: the job's user is the owner of its process (here: whoever made the tree)
        Path p200 = proc.resolve("200");
        assertThat(source.ownerOf(GPU, 200, List.of()).orElseThrow().labels()).isEqualTo(Map.of("step", "0",
                "cgroup", "v2", "uid", Files.getAttribute(p200, "unix:uid").toString(), "user",
                Files.getOwner(p200).getName()));
    }

    @Test
    void jobCgroupBeingRemovedStillNamesTheJob() throws IOException {
        write(300, "0::/system.slice/slurmstepd.scope/job_91/step_0/user/task_0 (deleted)\n");
        assertThat(source.jobOf(300).map(SlurmJobStep::jobId)).hasValue(91L);
    }

    @Test
    void processesInNoJobAndAbsentProcessesNameNone() throws IOException {
        write(400, "0::/user.slice/user-1000.slice/session-3.scope\n");
        write(401, """
                12:memory:/user.slice
                1:name=systemd:/user.slice/user-1000.slice/session-1.scope
                0::/user.slice/user-1000.slice/session-1.scope
                """);
        write(402, "0::/system.slice/slurmd.service\n");
        assertThat(source.jobOf(400)).isEmpty();
        assertThat(source.jobOf(401)).isEmpty();
        assertThat(source.jobOf(402)).as("slurmd itself").isEmpty();
        assertThat(source.jobOf(999)).as("no such process").isEmpty();
        assertThat(source.jobOf(0)).isEmpty();
        assertThat(source.jobOf(-5)).isEmpty();
    }

    @Test
    void chainsAfterAnotherSource() throws IOException {
        write(500, V2_STEP0);
        ProcessAttribution mine = (d, pid, h) -> pid == 501 ? Optional.of(UsageOwner.allocation("a-1"))
                : Optional.empty();
        ProcessAttribution chain = mine.orElse(source);
        assertThat(chain.ownerOf(GPU, 501, List.of())).hasValue(UsageOwner.allocation("a-1"));
        assertThat(chain.ownerOf(GPU, 500, List.of()).map(UsageOwner::id)).hasValue("89");
    }

    @Test
    void theRealProcOfThisProcessNamesNoJobUnlessRunUnderSlurm() {
        int self = (int) ProcessHandle.current().pid();
        Optional<SlurmJobStep> me = SlurmJobAttribution.host().jobOf(self);
        String slurmJob = System.getenv("SLURM_JOB_ID");
        if (slurmJob == null) {
            assertThat(me).isEmpty();
        } else {
            assertThat(me.map(j -> Long.toString(j.jobId()))).hasValue(slurmJob);
        }
    }
}
