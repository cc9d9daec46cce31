package io.gpusched.service.adversarial.review22;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequests;
import io.gpusched.server.Caller;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.adversarial.review10.Clients;
import io.gpusched.service.adversarial.review10.Queued;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review22: a hostile {@code --model} glob. GpuRequest.globToRegex turns each {@code *} into {@code .*} without
 * collapsing runs, and the pattern is matched (java.util.regex, backtracking) against every GPU's name; a run of n
 * stars before a character the name lacks costs about C(20 + n, n) steps per GPU ("Tesla V100-SXM2-32GB", 20 chars):
 * measured on this machine with a plain JVM, 13 stars 3 s, 16 stars 32 s, each star about 2.3x more (40 stars: longer
 * than the machine lives). Any local user may send one ({@code gpusched allocate --model '*************#'}; the flag is
 * only compiled, never bounded). While anything waits, a request that does not wait is tried by the fair queue's ONE
 * dispatcher inside the node ledger's transaction (FairQueue.dispatch, GpuScheduler.releaseEachThenAllocateInOrder,
 * DefaultGpuScheduler.grantInOrder, decideAllocation with no pick made outside the lock, Placement.pick): the regex
 * runs with the node's lock held, about 15 matches (7 free GPUs, then the step-by-step pass over all 8). Meanwhile no
 * one on the node can allocate or release: carol's release, handed to the stuck dispatcher, does not return (the
 * caller's join is not interruptible), and bob, waiting for the GPU she releases, is not served. A typed refusal
 * (NO_MATCHING_DEVICE or INVALID_REQUEST) was promised to hostile clients, not a node frozen at their will.
 *
 * <p>13 stars keep this test finite (about 45 s of lock on this machine; the bound below is 15 s, where a release
 * normally takes milliseconds); 40 stars freeze the node for good.
 */
@Tag("adversarial")
@Timeout(value = 3, unit = TimeUnit.MINUTES, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class ModelGlobHoldsTheNodeLockAttackTest {

    static final String EVIL = "*".repeat(13) + "#";

    @Test
    void aHostileModelGlobDoesNotStopOtherUsersReleasesAndGrants(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300)))) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 62231, false);
            Caller bob = ServiceBed.caller("gsu-bob", 62232, false);
            Caller carol = ServiceBed.caller("gsu-carol", 62233, false);
            Allocation carols = s.allocate(carol, GpuRequests.fromCliFlags(List.of("--devices=0")), Optional.empty(),
                    () -> false);
            CompletableFuture<Object> alices = new CompletableFuture<>();
            CompletableFuture<Boolean> released = new CompletableFuture<>();
            try (Queued bobs = Queued.queue(s, bob, "--devices=0")) {
                Thread a = new Thread(() -> {
                    try {
                        alices.complete(s.allocate(alice, GpuRequests.fromCliFlags(List.of("--model=" + EVIL)),
                                Optional.empty(), () -> false));
                    } catch (Throwable e) {
                        alices.complete(e);
                    }
                }, "alice-evil-glob");
                a.setDaemon(true);
                a.start();
                // until the queue's dispatcher is in the regex (or alice was answered: a product that bounds globs)
                Clients.await(() -> alices.isDone() || dispatcherInRegex(), 30);
                Thread r = new Thread(() -> {
                    try {
                        released.complete(s.release(carol, carols.id()));
                    } catch (Throwable e) {
                        released.completeExceptionally(e);
                    }
                }, "carol-release");
                r.setDaemon(true);
                r.start();
                boolean done = Clients.await(() -> released.isDone() && bobs.result.isDone(), 15);
                assertThat(done).as("within 15 s of carol's release of GPU 0 (bob waiting for it), while alice's"
                        + " request with --model '%s' is tried: carol's release returned: %s; bob served: %s; alice"
                        + " answered: %s; the queue's dispatcher in java.util.regex now: %s", EVIL, released.isDone(),
                        bobs.result.isDone(), alices.isDone(), dispatcherInRegex()).isTrue();
            } finally {
                // the node's lock comes back once alice's request is decided (finite here)
                Clients.await(() -> alices.isDone() && released.isDone(), 150);
            }
        }
    }

    private static boolean dispatcherInRegex() {
        return Thread.getAllStackTraces().entrySet().stream().anyMatch(e -> e.getKey().getName().equals(
                "gpusched-fair-queue")
                && Arrays.stream(e.getValue()).anyMatch(f -> f.getClassName().startsWith(
                        "java.util.regex")));
    }
}
