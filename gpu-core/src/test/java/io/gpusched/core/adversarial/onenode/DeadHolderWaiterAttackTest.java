package io.gpusched.core.adversarial.onenode;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.HolderProcess;
import io.gpusched.core.MemorySize;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * README: "A waiting head also checks, at its polling pace, whether a live allocation's holder process is gone and
 * then retries (reclaiming it), so waiters are served without a maintenance thread (maintenanceInterval(ZERO))."
 * Every scheduler here has {@code maintenanceInterval(ZERO)} and nobody else touches the node, so only the waiter
 * can find the dead holder: a waiter whose {@code maxWait} (60 s) ran out fails the test. While the holder lives the
 * waiter must sleep between polls (polled every 1 to 50 ms): the CPU its thread uses is read from the JVM and must
 * stay well below one core (a quarter of the time waited; a busy loop uses all of it).
 */
@Tag("adversarial")
class DeadHolderWaiterAttackTest {

    private static final Duration MAX_WAIT = Duration.ofSeconds(60);

    /** A waiter on its own thread, with the thread id for CPU accounting. */
    private static final class Waiter {
        final AtomicLong tid = new AtomicLong(-1);
        final CompletableFuture<Allocation> result = new CompletableFuture<>();
        final Thread thread;

        Waiter(GpuScheduler s, GpuRequest request) {
            Thread t = new Thread(() -> {
                tid.set(Thread.currentThread().getId());
                try {
                    result.complete(s.allocate(request, MAX_WAIT));
                } catch (Throwable e) {
                    result.completeExceptionally(e);
                }
            }, "waiter");
            t.setDaemon(true);
            thread = t;
            t.start();
        }

        /**
         * Returns once the waiter sleeps between its polls inside {@code allocate} (its thread seen parked, then a
         * few polls at 1 to 50 ms more), still unserved: the holder is then killed under a waiting waiter, as the
         * fixed half-second sleeps this replaces meant, without waiting out the rest of them.
         */
        void awaitWaiting() throws InterruptedException {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (thread.getState() != Thread.State.TIMED_WAITING && thread.getState() != Thread.State.WAITING
                    && !result.isDone() && System.nanoTime() < deadline) {
                Thread.sleep(5);
            }
            Thread.sleep(150);
            assertThat(result).as("still waiting while the holder lives").isNotDone();
        }

        /**
         * Waits {@code millis} while the waiter waits and returns the CPU share its thread used (a second is enough: a
         * waiter that polls without sleeping uses about all of any window; such a mutant failed at 1,000 ms).
         */
        double cpuShareOver(long millis) throws InterruptedException {
            ThreadMXBean mx = ManagementFactory.getThreadMXBean();
            while (tid.get() < 0) {
                Thread.sleep(5);
            }
            Thread.sleep(300); // past its first tries
            long c0 = mx.getThreadCpuTime(tid.get());
            long w0 = System.nanoTime();
            Thread.sleep(millis);
            long c1 = mx.getThreadCpuTime(tid.get());
            long w1 = System.nanoTime();
            assertThat(result).as("still waiting while the holder lives").isNotDone();
            return (double) (c1 - c0) / (w1 - w0);
        }

        Allocation served() throws Exception {
            try {
                return result.get(MAX_WAIT.toSeconds() + 30, TimeUnit.SECONDS);
            } catch (ExecutionException e) {
                throw new AssertionError("the waiter was not served after its holder died: " + e.getCause(),
                        e.getCause());
            }
        }
    }

    private static Process sleeper() throws Exception {
        return new ProcessBuilder("sleep", "600").start();
    }

    private static void kill(Process p) throws Exception {
        p.destroyForcibly();
        assertThat(p.waitFor(30, TimeUnit.SECONDS)).isTrue();
    }

    @Test
    void inMemoryAWaiterIsServedWhenTheHolderProcessDiesAndSleepsWhileItLives() throws Exception {
        Process holder = sleeper();
        try (GpuScheduler s = Nodes.inMemory(GpuInventories.simulated("dgx1-v100"))) {
            s.allocate(GpuRequest.builder().count(8).holder(HolderProcess.of(holder.pid())).build());
            Waiter w = new Waiter(s, GpuRequest.builder().count(2).build());
            double share = w.cpuShareOver(1000);
            kill(holder);
            assertThat(w.served().devices()).hasSize(2);
            assertThat(share).as("CPU share of the waiting thread while the holder lived").isLessThan(0.25);
        } finally {
            holder.destroyForcibly();
        }
    }

    @Test
    void inMemoryAWaiterForSharedMemoryIsServedWhenTheReservationsHolderDies() throws Exception {
        Process holder = sleeper();
        try (GpuScheduler s = Nodes.inMemory(GpuInventories.simulated("dgx1-v100"))) {
            for (int i = 0; i < 8; i++) {
                s.allocate(GpuRequest.builder().count(1).requiredDevices(i).shared(MemorySize.parse("30GB"))
                        .holder(HolderProcess.of(holder.pid())).build());
            }
            Waiter w = new Waiter(s, GpuRequest.builder().count(1).shared(MemorySize.parse("8GB")).build());
            w.awaitWaiting();
            kill(holder);
            assertThat(w.served().devices()).hasSize(1);
        } finally {
            holder.destroyForcibly();
        }
    }

    private static Process holdOnLedger(Path dir, String mode) throws Exception {
        Process p = Nodes.child(List.of(), HoldChild.class, dir.toString(), mode);
        BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
        String line = r.readLine();
        assertThat(line).as("the holder child").startsWith("HELD ");
        return p;
    }

    @Test
    void onALedgerAWaiterIsServedWhenTheHolderJvmIsKilledAndSleepsWhileItLives(@TempDir Path dir) throws Exception {
        Process holder = holdOnLedger(dir, "exclusive");
        try (GpuScheduler s = Nodes.open(GpuInventories.simulated("dgx1-v100"), dir)) {
            Waiter w = new Waiter(s, GpuRequest.builder().count(3).build());
            double share = w.cpuShareOver(1000);
            kill(holder);
            assertThat(w.served().devices()).hasSize(3);
            assertThat(share).as("CPU share of the waiting thread while the holder lived").isLessThan(0.25);
        } finally {
            holder.destroyForcibly();
        }
    }

    @Test
    void onALedgerAWaiterForSharedMemoryIsServedWhenTheHolderJvmIsKilled(@TempDir Path dir) throws Exception {
        Process holder = holdOnLedger(dir, "shared");
        try (GpuScheduler s = Nodes.open(GpuInventories.simulated("dgx1-v100"), dir)) {
            Waiter w = new Waiter(s, GpuRequest.builder().count(2).shared(MemorySize.parse("4GB")).build());
            w.awaitWaiting();
            kill(holder);
            assertThat(w.served().devices()).hasSize(2);
        } finally {
            holder.destroyForcibly();
        }
    }

    /** Two waiters of one process: the head is served by the reclaim, and the next one then as well. */
    @Test
    void onALedgerBothWaitersOfAProcessAreServedAfterTheHolderDies(@TempDir Path dir) throws Exception {
        Process holder = holdOnLedger(dir, "exclusive");
        try (GpuScheduler s = Nodes.open(GpuInventories.simulated("dgx1-v100"), dir)) {
            Waiter first = new Waiter(s, GpuRequest.builder().count(4).build());
            first.awaitWaiting();
            Waiter second = new Waiter(s, GpuRequest.builder().count(4).build());
            second.awaitWaiting();
            kill(holder);
            assertThat(first.served().devices()).hasSize(4);
            assertThat(second.served().devices()).hasSize(4).doesNotContainAnyElementsOf(first.served().devices());
        } finally {
            holder.destroyForcibly();
        }
    }

    /** A waiter in another process than the scheduler that sees the death first: a second JVM waits. */
    @Test
    void aWaiterInAnotherJvmIsServedWhenTheHolderJvmIsKilled(@TempDir Path dir) throws Exception {
        Process holder = holdOnLedger(dir, "exclusive");
        Process waiter = Nodes.child(List.of(), WaitChild.class, dir.toString(), "2", "60");
        try {
            BufferedReader r = new BufferedReader(new InputStreamReader(waiter.getInputStream(),
                    StandardCharsets.UTF_8));
            assertThat(r.readLine()).isEqualTo("WAITING");
            Thread.sleep(1000);
            kill(holder);
            assertThat(r.readLine()).as("the waiting JVM's answer").startsWith("SERVED ");
        } finally {
            holder.destroyForcibly();
            waiter.destroyForcibly();
        }
    }
}
