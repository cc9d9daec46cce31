package io.gpusched.service.adversarial.review12;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.UserQuotas;
import io.gpusched.server.Caller;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * stop() and close() called in every order an embedder might: two stops at once, close twice, close without stop.
 * None throws; after stop() every change is refused SHUTTING_DOWN and audited (the audit is still open); after close()
 * the lock is given up (a new service starts on the same state directory) and nothing is granted.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class StopAndCloseLifecycleAttackTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @Test
    void twoStopsAtOnceThenCloseTwiceThenANewServiceStarts(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, GpuConfig.builder().users(UserQuotas.none()).build())) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 65001, false);
            Allocation held = s.allocate(alice, GpuRequests.fromCliFlags("--gpu=1"), Optional.empty(), () -> false);
            CountDownLatch go = new CountDownLatch(1);
            List<Throwable> errors = new CopyOnWriteArrayList<>();
            List<Thread> stoppers = new ArrayList<>();
            for (int i = 0; i < 4; i++) {
                Thread t = new Thread(() -> {
                    try {
                        go.await();
                        s.stop();
                    } catch (Throwable e) {
                        errors.add(e);
                    }
                }, "review12-stop-" + i);
                t.start();
                stoppers.add(t);
            }
            go.countDown();
            for (Thread t : stoppers) {
                t.join(60_000);
                assertThat(t.isAlive()).as("stop returned").isFalse();
            }
            assertThat(errors).as("stops at once").isEmpty();
            // after the stop, before the close: refused SHUTTING_DOWN, and audited
            Throwable a = catchThrowable(() -> s.allocate(alice, GpuRequests.fromCliFlags("--gpu=1"), Optional
                    .empty(), () -> false));
            assertThat(a).as("allocate after stop").isNotNull().hasMessageContaining("stopping");
            Throwable r = catchThrowable(() -> s.release(alice, held.id()));
            assertThat(r).as("release after stop").isNotNull().hasMessageContaining("stopping");
            assertThat(bed.scheduler.allocation(held.id())).as("not released after the stop").isPresent();
            List<String> lines = audit(bed);
            assertThat(lines).as("audit after the stop").contains("allocate=SHUTTING_DOWN", "release=SHUTTING_DOWN");
            s.close();
            s.close();
            int before = bed.scheduler.allocations().size();
            Throwable late = catchThrowable(() -> s.allocate(alice, GpuRequests.fromCliFlags("--gpu=1"), Optional
                    .empty(), () -> false));
            assertThat(late).as("allocate after close").isNotNull();
            assertThat(bed.scheduler.allocations()).as("nothing granted after close").hasSize(before);
            NodeService next = bed.start(); // the lock was given up
            Allocation b = next.allocate(alice, GpuRequests.fromCliFlags("--gpu=1"), Optional.empty(), () -> false);
            assertThat(b.owner()).contains("gsu-alice");
            assertThat(audit(bed)).as("the new service audits").contains("allocate=ok");
        }
    }

    @Test
    void closeWithoutStopOnAServiceWithWaitersAuditsEachRefusal(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, GpuConfig.builder().users(UserQuotas.none()).build())) {
            NodeService s = bed.start();
            Caller root = ServiceBed.root();
            s.allocate(root, GpuRequests.fromCliFlags("--gpu=8", "--owner=root"), Optional.empty(), () -> false);
            List<Throwable> answers = new CopyOnWriteArrayList<>();
            List<Thread> ts = new ArrayList<>();
            for (int i = 0; i < 5; i++) {
                Caller c = ServiceBed.caller("gsu-q" + i, 65100 + i, false);
                Thread t = new Thread(() -> {
                    try {
                        s.allocate(c, GpuRequests.fromCliFlags("--gpu=1"), Optional.of(java.time.Duration.ofMinutes(
                                2)), () -> false);
                        answers.add(new AssertionError("granted"));
                    } catch (Throwable e) {
                        answers.add(e);
                    }
                }, "review12-q-" + i);
                t.start();
                ts.add(t);
            }
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (s.queueView().size() < 5 && System.nanoTime() < until) {
                Thread.sleep(10);
            }
            assertThat(s.queueView()).hasSize(5);
            s.close();
            for (Thread t : ts) {
                t.join(60_000);
            }
            assertThat(answers).hasSize(5).allSatisfy(e -> assertThat(e).hasMessageContaining("stopping"));
            long refused = audit(bed).stream().filter(l -> l.startsWith("allocate=") && !l.equals("allocate=ok"))
                    .count();
            assertThat(refused).as("each waiter's refusal audited before the audit closed: %s", audit(bed))
                    .isEqualTo(5);
        }
    }

    private static List<String> audit(ServiceBed bed) throws Exception {
        List<String> out = new ArrayList<>();
        Path log = bed.state.resolve("audit.log");
        if (!Files.exists(log)) {
            return out;
        }
        for (String l : Files.readAllLines(log)) {
            JsonNode n = JSON.readTree(l);
            out.add(n.path("action").asText() + "=" + n.path("result").asText());
        }
        return out;
    }
}
