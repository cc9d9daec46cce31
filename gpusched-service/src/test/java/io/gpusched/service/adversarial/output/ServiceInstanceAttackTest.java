package io.gpusched.service.adversarial.output;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.GpuException;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A second service on a node's state directory, and what a previous run left: a second {@code serve} (a manual run
 * beside the systemd unit) must be refused before it ends anything of the running service's (it would take the live
 * jobs for a dead predecessor's); a restart deletes the previous run's detached-job output files, which no record
 * reaches any more, without following a link; a job output directory someone else owns is refused.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class ServiceInstanceAttackTest {

    private static NodeService second(ServiceBed bed) {
        return NodeService.builder().scheduler(bed.scheduler).config(bed.config).stateDir(bed.state)
                .users(bed.users).jobs(null, "this test runs no jobs").build();
    }

    @Test
    void aSecondServiceOnTheStateDirectoryIsRefusedAndTouchesNothingOfTheFirst(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, DetachedJobs.config())) {
            bed.start();
            Path jobs = bed.state.resolve("jobs");
            Path live = Files.writeString(jobs.resolve("j-live.out"), "the running service's job writes here\n");
            try (NodeService again = second(bed)) {
                assertThatThrownBy(again::start).isInstanceOf(GpuException.class)
                        .hasMessageContaining(bed.state.toString())
                        .hasMessageContaining("pid " + ProcessHandle.current().pid())
                        .hasMessageContaining("stop it first");
            }
            assertThat(live).as("the first service's job output after a second service was refused")
                    .hasContent("the running service's job writes here");
            bed.service.close();
            bed.service = null;

            try (NodeService next = second(bed)) {
                next.start();
                assertThat(live).as("a restart: the previous run's output file, which no record reaches")
                        .doesNotExist();
            }
        }
    }

    @Test
    void aRestartDeletesThePreviousRunsOutputFilesWithoutFollowingALink(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, DetachedJobs.config())) {
            Path jobs = Files.createDirectories(bed.state.resolve("jobs"));
            Path victim = Files.writeString(tmp.resolve("victim.out"), "not the service's\n");
            Path old = Files.writeString(jobs.resolve("j-1.out"), "an old job's output\n");
            Path link = Files.createSymbolicLink(jobs.resolve("j-2.out"), victim);
            Path dir = Files.createDirectory(jobs.resolve("j-3.out"));
            Path other = Files.writeString(jobs.resolve("notes.txt"), "an admin's\n");
            bed.start();
            assertThat(old).doesNotExist();
            assertThat(Files.exists(link, LinkOption.NOFOLLOW_LINKS)).as("the planted link").isFalse();
            assertThat(victim).as("the link's target").hasContent("not the service's");
            assertThat(dir).isDirectory();
            assertThat(other).hasContent("an admin's");
        }
    }

    @Test
    void aJobOutputDirectoryAnotherUserOwnsIsRefused(@TempDir Path tmp) throws Exception {
        assumeTrue(Integer.valueOf(0).equals(Files.getAttribute(Path.of("/proc/self"), "unix:uid")),
                "needs root: gives the directory to another uid");
        try (ServiceBed bed = new ServiceBed(tmp, DetachedJobs.config())) {
            Path jobs = Files.createDirectories(bed.state.resolve("jobs"));
            Files.setAttribute(jobs, "unix:uid", 54321);
            assertThatThrownBy(() -> second(bed)).isInstanceOf(UncheckedIOException.class)
                    .hasMessageContaining(jobs.toString()).hasMessageContaining("uid 54321");
        }
    }
}
