package io.gpusched.service.adversarial.review12;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.UserQuotas;
import io.gpusched.server.Caller;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Requests that do not wait, tried in their callers' threads when nothing waits (FairQueue.direct), must keep the fair
 * queue's promises (docs/SERVICE.md): no user over gpu.users.max_gpus, nothing owed to a waiting request handed out
 * around it, a grant sends its user behind those who wait.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class DirectGrantsKeepTheQueuesPromisesAttackTest {

    /** 16 threads of one user race one-GPU requests that do not wait against a quota of 2: never more than 2 held. */
    @Test
    void manyRacingDirectRequestsOfOneUserNeverExceedTheQuota(@TempDir Path tmp) throws Exception {
        GpuConfig config = GpuConfig.builder().users(new UserQuotas(2, Map.of(), Map.of())).build();
        try (ServiceBed bed = new ServiceBed(tmp, config)) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 64001, false);
            AtomicInteger heldByAnswers = new AtomicInteger();
            AtomicInteger maxByAnswers = new AtomicInteger();
            AtomicInteger maxOnLedger = new AtomicInteger();
            AtomicBoolean stop = new AtomicBoolean();
            List<String> errors = new CopyOnWriteArrayList<>();
            CountDownLatch go = new CountDownLatch(1);
            List<Thread> ts = new ArrayList<>();
            for (int i = 0; i < 16; i++) {
                Thread t = new Thread(() -> {
                    try {
                        go.await();
                        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(8);
                        while (System.nanoTime() - until < 0) {
                            Allocation a;
                            try {
                                a = s.allocate(alice, GpuRequests.fromCliFlags("--gpu=1"), Optional.empty(),
                                        () -> false);
                            } catch (GpuAllocationException e) {
                                continue;
                            }
                            int h = heldByAnswers.incrementAndGet();
                            maxByAnswers.accumulateAndGet(h, Math::max);
                            int l = (int) bed.scheduler.allocations().stream().filter(x -> x.owner().orElse("")
                                    .equals("gsu-alice")).mapToInt(x -> x.deviceIndices().size()).sum();
                            maxOnLedger.accumulateAndGet(l, Math::max);
                            heldByAnswers.decrementAndGet();
                            s.release(alice, a.id());
                        }
                    } catch (Exception e) {
                        errors.add(e.toString());
                    }
                }, "review12-quota-" + i);
                t.start();
                ts.add(t);
            }
            go.countDown();
            for (Thread t : ts) {
                t.join(60_000);
            }
            stop.set(true);
            assertThat(errors).as("unexpected errors").isEmpty();
            assertThat(maxByAnswers.get()).as("most grants alice held at once by the answers (quota 2)")
                    .isLessThanOrEqualTo(2);
            assertThat(maxOnLedger.get()).as("most GPUs alice held at once on the ledger (quota 2)")
                    .isLessThanOrEqualTo(2);
        }
    }

    /**
     * Alice is served directly; the node is then full (root); alice queues one GPU, then bob one. One GPU frees: bob
     * (never served) must get it, alice waits on.
     */
    @Test
    void afterADirectGrantTheOneFreedGpuGoesToTheUserNeverServed(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, GpuConfig.builder().users(UserQuotas.none()).build())) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 64021, false);
            Caller bob = ServiceBed.caller("gsu-bob", 64022, false);
            Caller root = ServiceBed.root();
            s.allocate(alice, GpuRequests.fromCliFlags("--gpu=1"), Optional.empty(), () -> false);
            Allocation one = s.allocate(root, GpuRequests.fromCliFlags("--gpu=1", "--owner=root"), Optional.empty(),
                    () -> false);
            s.allocate(root, GpuRequests.fromCliFlags("--gpu=6", "--owner=root"), Optional.empty(), () -> false);
            CompletableFuture<Allocation> aliceWaits = CompletableFuture.supplyAsync(() -> call(s, alice));
            awaitQueued(s, 1);
            CompletableFuture<Allocation> bobWaits = CompletableFuture.supplyAsync(() -> call(s, bob));
            awaitQueued(s, 2);
            s.release(root, one.id());
            Allocation b = bobWaits.get(60, TimeUnit.SECONDS);
            assertThat(b.owner()).contains("gsu-bob");
            assertThat(aliceWaits).as("alice, served directly before, still waits").isNotDone();
            aliceWaits.cancel(true);
        }
    }

    private static Allocation call(NodeService s, Caller c) {
        try {
            return s.allocate(c, GpuRequests.fromCliFlags("--gpu=1"), Optional.of(Duration.ofSeconds(90)), () -> false);
        } catch (InterruptedException e) {
            throw new IllegalStateException(e);
        }
    }

    private static void awaitQueued(NodeService s, int n) throws InterruptedException {
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (s.queueView().size() < n) {
            assertThat(System.nanoTime() - until).as("%d requests queued", n).isNegative();
            Thread.sleep(10);
        }
    }
}
