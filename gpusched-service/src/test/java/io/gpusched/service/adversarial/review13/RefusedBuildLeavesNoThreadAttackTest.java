package io.gpusched.service.adversarial.review13;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.gpusched.core.GpuConfig;
import io.gpusched.core.ServiceSettings;
import io.gpusched.core.UserQuotas;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A NodeService whose build() is refused (a configuration error the embedder may retry after fixing, or a job output
 * directory of another owner) was never handed to anyone, so nobody can stop or close it: it must leave nothing
 * running. NodeService's constructor starts the fair queue's dispatcher ("gpusched-fair-queue", FairQueue's
 * constructor) before the checks that refuse the build (OutputFile.directory, the login cgroups' isolator): each
 * refused build leaves one dispatcher thread waiting forever, and an embedder that retries leaks one per try.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class RefusedBuildLeavesNoThreadAttackTest {

    @Test
    void loginCgroupsWithoutAnIsolatorLeaveNoDispatcherBehind(@TempDir Path tmp) throws Exception {
        refusedBuildsLeaveNoThread(tmp, bed -> {}, GpuConfig.builder().users(UserQuotas.none()).service(
                ServiceSettings.defaults().withLoginCgroups(List.of(Path.of("/sys/fs/cgroup/gsu-r13-login"))))
                .build());
    }

    @Test
    void aJobOutputDirectoryOfAnotherOwnerLeavesNoDispatcherBehind(@TempDir Path tmp) throws Exception {
        refusedBuildsLeaveNoThread(tmp, bed -> {
            try {
                Path jobs = Files.createDirectories(bed.state.resolve("jobs"));
                Files.setAttribute(jobs, "unix:uid", 54321);
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        }, GpuConfig.builder().users(UserQuotas.none()).build());
    }

    private static void refusedBuildsLeaveNoThread(Path tmp, Consumer<ServiceBed> prepare, GpuConfig config)
            throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, GpuConfig.builder().users(UserQuotas.none()).build())) {
            prepare.accept(bed);
            long before = dispatchers();
            Throwable last = null;
            for (int i = 0; i < 5; i++) {
                last = catchThrowable(() -> NodeService.builder().scheduler(bed.scheduler).config(config).stateDir(
                        bed.state).jobs(null, "this test runs no jobs").build());
                assertThat(last).as("build %d is refused", i).isNotNull();
            }
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (dispatchers() > before && System.nanoTime() < until) {
                Thread.sleep(50);
            }
            assertThat(dispatchers() - before).as("gpusched-fair-queue threads left by 5 refused builds (%s)",
                    last.toString()).isZero();
        }
    }

    private static long dispatchers() {
        return Thread.getAllStackTraces().keySet().stream().filter(t -> t.isAlive() && t.getName().equals(
                "gpusched-fair-queue")).count();
    }
}
