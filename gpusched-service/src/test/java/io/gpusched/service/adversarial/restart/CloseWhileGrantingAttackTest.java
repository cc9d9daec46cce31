package io.gpusched.service.adversarial.restart;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.UserQuotas;
import io.gpusched.server.Caller;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.testing.LedgerReader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code NodeService.close()} while its fair queue hands GPUs from releases to waiting requests. The queue's close
 * dropped every waiting request ("the node service is stopping; the request was not served") and interrupted the
 * dispatcher, but did not wait for it (fixed: it now waits for the dispatcher's transaction first): a transaction the dispatcher has begun still grants in the node ledger, after
 * close has returned, to a request whose caller was just told it was not served; the dispatcher then releases that
 * grant, also after close, or (the scheduler closed meanwhile, as {@code gpusched serve} and {@code ServiceBed} close
 * it right after the service) cannot, and the GPU stays held in the ledger for nobody. The independent
 * {@link LedgerReader} checks every grant the ledger records against the grants the service's callers were told of.
 */
@Tag("adversarial")
@Timeout(value = 4, unit = TimeUnit.MINUTES)
class CloseWhileGrantingAttackTest {
    private static final int WAITERS = 32;
    private static final int ROUNDS = 6;

    @Test
    void noGrantReachesTheLedgerForACallerTheClosingServiceRefused(@TempDir Path tmp) throws Exception {
        List<String> found = new ArrayList<>();
        for (int round = 0; round < ROUNDS && found.isEmpty(); round++) {
            found.addAll(round(Files.createDirectory(tmp.resolve("round-" + round)), round));
        }
        assertThat(found).as("allocations the node ledger records that no caller was told of (granted by the"
                + " service's queue while or after its close() dropped their requests)").isEmpty();
    }

    /** @return what the ledger holds or held that no caller was told of */
    private static List<String> round(Path dir, int round) throws Exception {
        Map<String, String> acked = new ConcurrentHashMap<>();
        Set<String> released = ConcurrentHashMap.newKeySet();
        LinkedBlockingQueue<String> toRelease = new LinkedBlockingQueue<>();
        AtomicBoolean stopping = new AtomicBoolean();
        AtomicInteger grants = new AtomicInteger();
        Caller root = ServiceBed.root();
        List<Thread> threads = new ArrayList<>();
        Set<Thread> others = dispatchers(); // other tests' services in this JVM: not this round's
        ServiceBed bed = new ServiceBed(dir, GpuConfig.builder().users(UserQuotas.none()).build());
        try {
            NodeService s = bed.start();
            Caller fill = ServiceBed.caller("gsu-fill", 62_999, false);
            for (int i = 0; i < 8; i++) {
                Allocation a = s.allocate(fill, GpuRequest.builder().count(1).build(), Optional.empty(), () -> false);
                acked.put(a.id(), "gsu-fill");
                toRelease.add(a.id());
            }
            for (int i = 0; i < WAITERS; i++) {
                Caller u = ServiceBed.caller("gsu-w" + i, 63_000 + i, false);
                Thread t = new Thread(() -> {
                    while (!stopping.get()) {
                        try {
                            Allocation a = s.allocate(u, GpuRequest.builder().count(1).build(),
                                    Optional.of(Duration.ofMinutes(2)), () -> false);
                            acked.put(a.id(), u.user()); // told to its caller
                            grants.incrementAndGet();
                            toRelease.add(a.id());
                        } catch (InterruptedException e) {
                            return;
                        } catch (RuntimeException e) {
                            return; // refused: the service is stopping
                        }
                    }
                }, "waiter-" + i);
                threads.add(t);
            }
            for (int i = 0; i < 2; i++) {
                Thread t = new Thread(() -> {
                    while (!stopping.get()) {
                        try {
                            String id = toRelease.poll(50, TimeUnit.MILLISECONDS);
                            if (id != null && s.release(root, id)) {
                                released.add(id);
                            }
                        } catch (InterruptedException e) {
                            return;
                        } catch (RuntimeException e) {
                            // the scheduler closed under an in-flight release: the id stays counted as held
                        }
                    }
                }, "releaser-" + i);
                threads.add(t);
            }
            threads.forEach(Thread::start);
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            int target = 60 + round * 37; // close at a different point of the churn each round
            while (grants.get() < target && System.nanoTime() < until) {
                Thread.sleep(5);
            }
            assertThat(grants.get()).as("the queue hands released GPUs to waiters").isGreaterThanOrEqualTo(target);
            stopping.set(true);
            s.close();
            bed.scheduler.close(); // as gpusched serve does right after the service: the node's ledger closes
            for (Thread t : threads) {
                t.join(TimeUnit.SECONDS.toMillis(60));
            }
            awaitDispatcherGone(others);
        } finally {
            stopping.set(true);
            bed.close();
        }
        LedgerReader ledger = LedgerReader.read(dir.resolve("state"));
        List<String> out = new ArrayList<>();
        for (String id : ledger.live.keySet()) {
            if (!acked.containsKey(id)) {
                out.add("round " + round + ": " + id + " is still held in the ledger, but no caller was told of it");
            }
        }
        for (LedgerReader.Ended e : ledger.ended) {
            if (!acked.containsKey(e.id())) {
                out.add("round " + round + ": " + e.id() + " was granted in the ledger and released (" + e.cause()
                        + "), but no caller was told of it");
            }
        }
        assertThat(ledger.doubleGrants).as("double grants").isEmpty();
        return out;
    }

    /** @return the fair-queue dispatcher threads alive in this JVM */
    private static Set<Thread> dispatchers() {
        Set<Thread> out = new HashSet<>();
        Thread.getAllStackTraces().keySet().stream().filter(t -> t.getName().equals("gpusched-fair-queue")
                && t.isAlive()).forEach(out::add);
        return out;
    }

    /**
     * Waits (polling, up to 30 s) until no fair-queue dispatcher runs in this JVM but those of {@code others} (this
     * round's service's, closed; a whole-suite run has other tests' services in the same JVM).
     */
    private static void awaitDispatcherGone(Set<Thread> others) throws InterruptedException {
        for (int i = 0; i < 600; i++) {
            Set<Thread> alive = dispatchers();
            alive.removeAll(others);
            if (alive.isEmpty()) {
                return;
            }
            Thread.sleep(50);
        }
    }
}
