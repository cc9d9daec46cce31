package io.gpusched.service.adversarial.review12;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationEvent;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.UserQuotas;
import io.gpusched.server.Caller;
import io.gpusched.service.HeldEvents;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * An embedder that only calls {@link NodeService#close()} (the old order) while grants are under way: every grant
 * acknowledged to its caller must have its "allocate ok" line in audit.log (docs/SERVICE.md: the audit records every
 * change). The grant's audit line is written by the caller's thread after the queue answered it
 * (NodeService.allocate), which neither the queue's close nor the stop gate waits for; the close closes the audit
 * right after the stop returned.
 */
@Tag("adversarial")
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class GrantsAcrossTheCloseAttackTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final int ROUNDS = 8;

    private static GpuConfig config() {
        return GpuConfig.builder().users(UserQuotas.none()).build();
    }

    /** Queued grants made in one dispatcher transaction as close() comes: each is audited. */
    @Test
    void aBatchOfQueuedGrantsAnsweredAsTheCloseComesIsAudited(@TempDir Path tmp) throws Exception {
        queuedBatchAsTheEndComes(tmp, NodeService::close);
    }

    /**
     * The same with the documented order for a host without a console in front: stop(), then close() at once (the
     * console's close grace is what gives the callers' threads time to audit; an embedder without one has none).
     */
    @Test
    void aBatchOfQueuedGrantsAnsweredAsTheStopComesIsAuditedWhenCloseFollows(@TempDir Path tmp) throws Exception {
        queuedBatchAsTheEndComes(tmp, s -> {
            s.stop();
            s.close();
        });
    }

    private static void queuedBatchAsTheEndComes(Path tmp, java.util.function.Consumer<NodeService> end)
            throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, config())) {
            List<String> missing = new ArrayList<>();
            int acknowledged = 0;
            for (int round = 0; round < ROUNDS; round++) {
                NodeService s = bed.start();
                Caller hog = ServiceBed.caller("gsu-hog", 63000, false);
                Allocation all = s.allocate(hog, GpuRequests.fromCliFlags("--gpu=8"), Optional.empty(), () -> false);
                List<Thread> waiters = new ArrayList<>();
                List<Allocation> got = new CopyOnWriteArrayList<>();
                for (int i = 0; i < 8; i++) {
                    Caller c = ServiceBed.caller("gsu-w" + i, 63100 + i, false);
                    Thread t = new Thread(() -> {
                        try {
                            got.add(s.allocate(c, GpuRequests.fromCliFlags("--gpu=1"), Optional.of(Duration
                                    .ofMinutes(2)), () -> false));
                        } catch (Exception e) {
                            // refused by the stop: not a grant
                        }
                    }, "review12-waiter-" + i);
                    t.start();
                    waiters.add(t);
                }
                awaitQueued(bed, 8);
                HeldEvents hold = new HeldEvents(bed.scheduler, AllocationEvent.Type.ALLOCATED, 1);
                Thread releaser = new Thread(() -> {
                    try {
                        s.release(hog, all.id());
                    } catch (Exception e) {
                        // the stop may refuse it
                    }
                }, "review12-releaser");
                releaser.start();
                assertThat(hold.awaitHeld(1)).as("the dispatcher's grants began").isTrue();
                Thread closer = new Thread(() -> end.accept(s), "review12-closer");
                closer.start();
                awaitIn(closer, "FairQueue", "close");
                hold.letGo();
                closer.join(60_000);
                assertThat(closer.isAlive()).as("close returned").isFalse();
                for (Thread t : waiters) {
                    t.join(60_000);
                }
                releaser.join(60_000);
                hold.close();
                Set<String> audited = auditedGrants(bed);
                for (Allocation a : got) {
                    acknowledged++;
                    if (!audited.contains(a.id())) {
                        missing.add("round " + round + ": " + a.id() + " (" + a.owner().orElse("?") + ")");
                    }
                }
                for (Allocation a : bed.scheduler.allocations()) {
                    bed.scheduler.release(a.id());
                }
            }
            assertThat(acknowledged).as("grants acknowledged over the rounds").isPositive();
            assertThat(missing)
                    .as("grants acknowledged to their callers with no 'allocate ok' line in audit.log (of %d)",
                            acknowledged)
                    .isEmpty();
        }
    }

    /** Direct grants (nothing waited) under way as close() comes: each is audited. */
    @Test
    void directGrantsUnderWayAsTheCloseComesAreAudited(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, config())) {
            List<String> missing = new ArrayList<>();
            int acknowledged = 0;
            for (int round = 0; round < ROUNDS; round++) {
                NodeService s = bed.start();
                HeldEvents hold = new HeldEvents(bed.scheduler, AllocationEvent.Type.ALLOCATED, 8);
                List<Thread> callers = new ArrayList<>();
                List<Allocation> got = new CopyOnWriteArrayList<>();
                for (int i = 0; i < 8; i++) {
                    Caller c = ServiceBed.caller("gsu-d" + i, 63200 + i, false);
                    Thread t = new Thread(() -> {
                        try {
                            got.add(s.allocate(c, GpuRequests.fromCliFlags("--gpu=1"), Optional.empty(), () -> false));
                        } catch (Exception e) {
                            // refused: not a grant
                        }
                    }, "review12-direct-" + i);
                    t.start();
                    callers.add(t);
                }
                // as many as the ledger lets through at once are in their listener; the others wait for the ledger
                assertThat(hold.awaitHeld(1)).as("a direct grant began").isTrue();
                Thread.sleep(200);
                Thread closer = new Thread(s::close, "review12-closer");
                closer.start();
                awaitIn(closer, "FairQueue", "close");
                hold.letGo();
                closer.join(60_000);
                assertThat(closer.isAlive()).as("close returned").isFalse();
                for (Thread t : callers) {
                    t.join(60_000);
                }
                hold.close();
                Set<String> audited = auditedGrants(bed);
                for (Allocation a : got) {
                    acknowledged++;
                    if (!audited.contains(a.id())) {
                        missing.add("round " + round + ": " + a.id() + " (" + a.owner().orElse("?") + ")");
                    }
                }
                for (Allocation a : bed.scheduler.allocations()) {
                    if (!audited.contains(a.id())) {
                        missing.add("round " + round + ": on the ledger, never audited: " + a.id());
                    }
                    bed.scheduler.release(a.id());
                }
            }
            assertThat(acknowledged).as("grants acknowledged over the rounds").isPositive();
            assertThat(missing).as("direct grants with no 'allocate ok' line in audit.log (of %d acknowledged)",
                    acknowledged).isEmpty();
        }
    }

    private static void awaitQueued(ServiceBed bed, int n) throws InterruptedException {
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (bed.service.queueView().size() < n) {
            assertThat(System.nanoTime() - until).as("%d requests queued", n).isNegative();
            Thread.sleep(10);
        }
    }

    /** Waits until {@code t} is parked inside {@code cls.method} (e.g. the queue's close waiting for the grant). */
    private static void awaitIn(Thread t, String cls, String method) throws InterruptedException {
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (true) {
            StackTraceElement[] st = t.getStackTrace();
            boolean in = Arrays.stream(st).anyMatch(e -> e.getClassName().endsWith("." + cls) && e.getMethodName()
                    .equals(method));
            Thread.State state = t.getState();
            if (in && (state == Thread.State.TIMED_WAITING || state == Thread.State.WAITING)) {
                return;
            }
            assertThat(System.nanoTime() - until).as("%s waits in %s.%s", t.getName(), cls, method).isNegative();
            Thread.sleep(5);
        }
    }

    /** @return the subjects of audit.log's "allocate" lines with result ok */
    static Set<String> auditedGrants(ServiceBed bed) throws Exception {
        Set<String> out = new HashSet<>();
        Path log = bed.state.resolve("audit.log");
        if (!Files.exists(log)) {
            return out;
        }
        for (String l : Files.readAllLines(log)) {
            JsonNode n = JSON.readTree(l);
            if ("allocate".equals(n.path("action").asText()) && "ok".equals(n.path("result").asText())) {
                out.add(n.path("subject").asText());
            }
        }
        return out;
    }
}
