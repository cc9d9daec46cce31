package io.gpusched.slurm.adversarial;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.slurm.SlurmJobAttribution;
import io.gpusched.slurm.SlurmJobStep;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * What a hostile user can make their processes' {@code /proc/<pid>/cgroup} say, and what a fixture tree that is not the
 * kernel's can hold: none of it charges their GPU work to someone else's Slurm job, and nothing blocks or grows
 * without bound.
 */
@Tag("adversarial")
class SlurmCgroupAttackTest {
    @TempDir
    Path proc;

    /**
     * Paths a user can reach (a subtree delegated to them: their user@.service, or below the step Slurm put them in)
     * or that are not Slurm's shape.
     */
    @ParameterizedTest
    @ValueSource(strings = {
        "0::/user.slice/user-1000.slice/user@1000.service/app.slice/job_5/step_0",
        "0::/user.slice/user-1000.slice/user@1000.service/slurmstepd.scope/job_5/step_0",
        "0::/system.slice/evil.service/slurmstepd.scope/job_5",
        "0::/system.slice/slurmstepd.scope/../slurmstepd.scope/job_5",
        "0::/system.slice/slurmstepd.scope/job_05/step_0",
        "0::/system.slice/slurmstepd.scope/job_0/step_0",
        "0::/system.slice/slurmstepd.scope/job_4294967295/step_0",
        "0::/system.slice/slurmstepd.scope/job_99999999999/step_0",
        "0::/system.slice/slurmstepd.scope/job_-5/step_0",
        "0::/system.slice/slurmstepd.scope/job_5x/step_0",
        "0::/system.slice/slurmstepd.scopejob_5",
        "0::/system.slice/slurmstepd.scope/job_/step_0",
        "0::system.slice/slurmstepd.scope/job_5",
        "3:pids:/slurm/uid_0/job_5/step_0",
        "4:net_cls:/slurm/uid_1000/job_5/step_0",
        "4:devices:/home/slurm/uid_1000/job_5",
        "4:devices:/slurm/uid_01/job_5",
        "4:devices:/slurm/uid_99999999999/job_5",
        "4:devices:/slurm/job_5/step_0",
        "1::/system.slice/slurmstepd.scope/job_5",
        ""})
    void pathsOutsideSlurmsRootNameNoJob(String file) {
        assertThat(SlurmJobStep.fromProcCgroup(file + "\n")).as(file).isEmpty();
    }

    @Test
    void aCgroupNameWithANewlineCannotForgeALine() {
        // were a cgroup name to hold a newline (this kernel refuses them: SlurmRealCgroupTest), a user nesting "x\n0::"
        // and system.slice/slurmstepd.scope/job_5 under their own slice would make the file show two hierarchy-0 lines
        assertThat(SlurmJobStep.fromProcCgroup("0::/user.slice/user-1000.slice/user@1000.service/x\n"
                + "0::/system.slice/slurmstepd.scope/job_5/step_0\n")).isEmpty();
        // in v1 (hybrid: the forged line rides on the unified hierarchy's line), a controller named twice
        assertThat(SlurmJobStep.fromProcCgroup("4:devices:/user.slice\n8:freezer:/user.slice\n"
                + "0::/user.slice/user-1000.slice/x\n99:devices:/slurm/uid_0/job_5/step_0\n")).isEmpty();
        // a line not shaped as the kernel writes one
        assertThat(SlurmJobStep.fromProcCgroup("0::/system.slice/slurmstepd.scope/job_5/step_0\nforged\n")).isEmpty();
    }

    @Test
    void firstJobBelowSlurmsRootWinsNotADeeperOneTheUserMade() {
        assertThat(SlurmJobStep.fromProcCgroup(
                "0::/system.slice/slurmstepd.scope/job_89/step_0/user/task_0/job_90/step_3\n")
                .map(SlurmJobStep::jobId)).hasValue(89L);
    }

    @Test
    void controllersInTwoJobsNameNone() {
        assertThat(SlurmJobStep.fromProcCgroup("""
                9:devices:/slurm/uid_1000/job_1/step_0
                8:freezer:/slurm/uid_1001/job_2/step_0
                """)).isEmpty();
    }

    @Test
    void hugeInputIsCutAndStillAnswers() {
        String big = "0::/system.slice/slurmstepd.scope/job_7/step_0/" + "a/".repeat(200_000) + "\n";
        assertThat(SlurmJobStep.fromProcCgroup(big).map(SlurmJobStep::jobId)).as("the line is cut; still job 7")
                .hasValue(7L);
        assertThat(SlurmJobStep.fromProcCgroup(("5:memory:/x\n").repeat(100_000))).isEmpty();
    }

    @Test
    @Timeout(value = 20, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD) // a FIFO blocks
    void fifoLinkAndDirectoryInPlaceOfTheFileAreNotOpened() throws Exception {
        Path fifo = Files.createDirectories(proc.resolve("10")).resolve("cgroup");
        Process mk = new ProcessBuilder("mkfifo", fifo.toString()).start();
        assumeTrue(mk.waitFor() == 0, "mkfifo is needed");
        Files.createDirectories(proc.resolve("11"));
        Files.createSymbolicLink(proc.resolve("11").resolve("cgroup"), Path.of("/dev/zero"));
        Files.createDirectories(proc.resolve("12").resolve("cgroup"));
        Path real = Files.createDirectories(proc.resolve("real"));
        Files.writeString(real.resolve("cgroup"), "0::/system.slice/slurmstepd.scope/job_5/step_0\n");
        Files.createSymbolicLink(proc.resolve("13"), real);
        SlurmJobAttribution s = SlurmJobAttribution.of(proc);
        assertThat(s.jobOf(10)).as("a FIFO would block a read").isEmpty();
        assertThat(s.jobOf(11)).as("a link to /dev/zero would never end").isEmpty();
        assertThat(s.jobOf(12)).isEmpty();
        assertThat(s.jobOf(13).map(SlurmJobStep::jobId)).as("/proc/<pid> itself may be a link: the file is not")
                .hasValue(5L);
    }

    @Test
    void unreadableFileNamesNoJob() throws IOException {
        Path f = Files.createDirectories(proc.resolve("20")).resolve("cgroup");
        Files.write(f, new byte[]{(byte) 0xff, 0, (byte) 0xfe, '\n'});
        assertThat(SlurmJobAttribution.of(proc).jobOf(20)).isEmpty();
    }
}
