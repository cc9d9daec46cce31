package io.gpusched.service.adversarial.review13;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.adversarial.review10.Clients;
import io.gpusched.testing.LocalUsers;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * stop() "cancels every job (TERM, then KILL after the grace period)" and an interrupted stop "must still return only
 * when nothing can be granted any more" (review12's fix, for the queue). The jobs' part of the stop (Jobs.close) gives
 * up at the first interrupt: an interrupt while it waits for a job that ignores TERM, or one already pending (the
 * interrupt FairQueue.close waited through and re-asserted), makes stop() return with the job still running in its
 * cgroup and its GPUs held; the job is KILLed and its allocation released later, after stop() returned (a release on
 * the ledger after the stop, and after close() when the embedder closes at once).
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class InterruptedStopLeavesJobsRunningAttackTest {

    @Test
    void aStopInterruptedWhileItWaitsForAJobReturnsOnlyOnceTheJobIsOver(@TempDir Path tmp) throws Exception {
        run(tmp, false);
    }

    @Test
    void aStopCalledWithAPendingInterruptReturnsOnlyOnceTheJobIsOver(@TempDir Path tmp) throws Exception {
        run(tmp, true);
    }

    private static void run(Path tmp, boolean pending) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofSeconds(4))).jobs()) {
            NodeService s = bed.start();
            bed.serve();
            LocalUsers.User alice = bed.accounts.user("alice");
            Process client = Clients.attached(bed, alice, Clients.jobBody(Clients.homeOf(tmp, alice), List.of(
                    "/bin/sh", "-c", "trap '' TERM; exec sleep 600")));
            try {
                String id = Clients.awaitRunning(s, 60);
                assertThat(Clients.await(() -> {
                    try {
                        return Clients.stateOf(bed.jobParent, "sleep").isPresent(); // TERM ignored from here on
                    } catch (java.io.IOException e) {
                        return false;
                    }
                }, 60)).as("the job's sleep runs").isTrue();
                AtomicReference<String> atReturn = new AtomicReference<>();
                Thread stopper = new Thread(() -> {
                    if (pending) {
                        Thread.currentThread().interrupt();
                    }
                    s.stop();
                    try {
                        List<String> left = new ArrayList<>();
                        Clients.jobProcesses(bed.jobParent).forEach(p -> left.add("process " + p));
                        Clients.jobCgroups(bed.jobParent).forEach(c -> left.add("cgroup " + c.getFileName()));
                        left.addAll(Clients.held(bed));
                        left.add("job " + Clients.job(s, id).get("state"));
                        atReturn.set(String.join("; ", left));
                    } catch (Exception e) {
                        atReturn.set(e.toString());
                    }
                }, "review13-stopper");
                stopper.start();
                if (!pending) {
                    long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                    while (!(Arrays.stream(stopper.getStackTrace()).anyMatch(f -> f.getClassName().endsWith(".Jobs")
                            && f.getMethodName().equals("close"))) && System.nanoTime() < until) {
                        Thread.sleep(5);
                    }
                    Thread.sleep(200);
                    stopper.interrupt();
                }
                stopper.join(60_000);
                assertThat(stopper.isAlive()).as("stop returned").isFalse();
                assertThat(atReturn.get()).as("what was left of alice's job (TERM ignored, kill grace 4 s) when stop()"
                        + " returned, its thread interrupted%s",
                        pending ? " before it was called"
                                : " while the stop waited for the job")
                        .isEqualTo("job CANCELLED");
            } finally {
                Clients.cleanUp(bed, alice, client);
            }
        }
    }
}
