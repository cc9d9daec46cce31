package io.gpusched.service.adversarial.review13;

import static org.assertj.core.api.Assertions.assertThat;

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
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * NodeService.stop() "returns once the changes under way when it came have ended" (its audit lines written), and the
 * fix of review12 made an interrupted stop keep the queue's promise. The stop gate's own wait (StopGate.awaitChanges)
 * is not interrupt-proof: an interrupt while it waits, or one already pending when it is reached (FairQueue.close
 * re-asserts the interrupt it waited through), ends the wait at once. A change under way then finishes after stop()
 * returned: after close() too, so the caller is told "ok" and audit.log never gets its line.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class InterruptedStopAndChangesUnderWayAttackTest {

    private static GpuConfig config() {
        return GpuConfig.builder().users(UserQuotas.none()).build();
    }

    /** A renew under way (held in its ledger event) as the stop comes; the stopping thread is interrupted. */
    @Test
    void anInterruptedStopWaitsForARenewUnderWay(@TempDir Path tmp) throws Exception {
        runAgainstAnInterruptedStop(tmp, false);
    }

    /** The same, with the stopping thread's interrupt already pending when it calls stop() (a shutdownNow). */
    @Test
    void aStopCalledWithAPendingInterruptWaitsForARenewUnderWay(@TempDir Path tmp) throws Exception {
        runAgainstAnInterruptedStop(tmp, true);
    }

    private static void runAgainstAnInterruptedStop(Path tmp, boolean pending) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, config())) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-r13a", 67100, false);
            Allocation a = s.allocate(alice, GpuRequests.fromCliFlags("--gpu=1"), Optional.empty(), () -> false);
            HeldEvents hold = new HeldEvents(bed.scheduler, AllocationEvent.Type.RENEWED, Integer.MAX_VALUE);
            AtomicBoolean renewEnded = new AtomicBoolean();
            AtomicReference<Object> told = new AtomicReference<>();
            Thread renewer = new Thread(() -> {
                try {
                    told.set(s.renew(alice, a.id(), Duration.ofHours(3)));
                } catch (RuntimeException e) {
                    told.set(e);
                } finally {
                    renewEnded.set(true);
                }
            }, "review13-renewer");
            renewer.start();
            assertThat(hold.awaitHeld(1)).as("the renew reached the ledger").isTrue();
            AtomicBoolean renewUnderWayWhenStopReturned = new AtomicBoolean();
            Thread stopper = new Thread(() -> {
                if (pending) {
                    Thread.currentThread().interrupt();
                }
                s.stop();
                renewUnderWayWhenStopReturned.set(!renewEnded.get());
                s.close(); // an embedder without a console: stop, then close (the audit closes)
            }, "review13-stopper");
            stopper.start();
            if (!pending) {
                long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                while (!(stopper.getState() == Thread.State.TIMED_WAITING && Arrays.stream(stopper.getStackTrace())
                        .anyMatch(f -> f.getMethodName().equals("awaitChanges"))) && System.nanoTime() < until) {
                    Thread.sleep(5);
                }
                stopper.interrupt();
            }
            stopper.join(2_000); // a stop that keeps its promise still waits for the renew here (one that does not
            // returns at once after the interrupt)
            boolean returnedFirst = !stopper.isAlive();
            hold.letGo();
            stopper.join(60_000);
            renewer.join(60_000);
            hold.close();
            List<String> audit = Files.readAllLines(bed.state.resolve("audit.log"));
            boolean renewAudited = audit.stream().anyMatch(l -> l.contains("\"action\":\"renew\"") && l.contains(a
                    .id()));
            assertThat(returnedFirst && renewUnderWayWhenStopReturned.get()).as("stop() returned (its thread"
                    + " interrupted%s) while a renew was still under way; the renew's caller was then told %s, and"
                    + " audit.log %s its line", pending ? " before it was called" : " in the stop gate's wait",
                    told.get() instanceof Allocation ? "ok" : told.get(), renewAudited ? "has" : "lacks").isFalse();
            assertThat(told.get() instanceof Allocation && !renewAudited).as("a renew acknowledged to its caller has"
                    + " no line in audit.log").isFalse();
        }
    }
}
