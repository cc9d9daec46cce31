package io.gpusched.isolation;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.isolation.CgroupDeviceIsolator.Mechanism;
import io.gpusched.testing.LocalUsers.User;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ForkJoinPool;
import java.util.concurrent.ForkJoinTask;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A job's end is seen while the common fork-join pool is busy. {@link Process#onExit()} completes its future on that
 * pool; on JDK 25 with the pool's parallelism of one (a 2-CPU machine), it waited behind whatever task blocked there:
 * the node service's driver of an attached job saw its job end only when an unrelated blocking task let go, and the
 * service's stop waited 30 s for it. {@link LaunchedJob#waitFor} must be woken by the process's end itself. (On JDK 17
 * an async task on a one-thread pool gets a thread of its own, so only JDK 25's run of this test bites.)
 */
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class JobEndWithBusyCommonPoolTest {
    @Test
    void aJobsEndIsSeenWhileEveryCommonPoolWorkerIsBlocked(@TempDir Path tmp) throws Exception {
        try (JobBed jb = new JobBed(tmp, Mechanism.V2)) {
            User alice = jb.users.user("alice");
            CountDownLatch letGo = new CountDownLatch(1);
            CountDownLatch blocking = new CountDownLatch(ForkJoinPool.getCommonPoolParallelism());
            List<ForkJoinTask<?>> blockers = new ArrayList<>();
            try {
                for (int i = 0; i < ForkJoinPool.getCommonPoolParallelism(); i++) {
                    blockers.add(ForkJoinPool.commonPool().submit(() -> {
                        blocking.countDown();
                        letGo.await();
                        return null;
                    }));
                }
                assertThat(blocking.await(60, TimeUnit.SECONDS)).as("every common-pool worker blocked").isTrue();
                LaunchedJob j = jb.launch(jb.spec(alice, List.of("/bin/sh", "-c", "exit 7"), Map.of()), jb.gpus(0));
                assertThat(j.waitFor(Duration.ofSeconds(60))).as("the job's exit, seen with the common pool busy")
                        .contains(7);
                assertThat(j.cleanUp()).isEmpty();
            } finally {
                letGo.countDown();
                for (ForkJoinTask<?> b : blockers) {
                    b.join();
                }
            }
        }
    }
}
