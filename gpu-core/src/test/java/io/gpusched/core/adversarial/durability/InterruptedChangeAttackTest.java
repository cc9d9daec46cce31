package io.gpusched.core.adversarial.durability;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.MemorySize;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Attack on the ledger's handling of interrupted callers. Schedulers cancel work with {@code Future.cancel(true)},
 * so a thread that calls {@code release} (which declares no {@link InterruptedException}) may carry its interrupt
 * flag. {@code Ledger.lead} documents "the change is queued: it is decided and written whatever happens" and re-sets
 * the flag before the caller leads the batch, whose lock and write go through {@link java.nio.channels.FileChannel},
 * an interruptible channel: an interrupted thread entering {@code lock()}/{@code write()}/{@code force()} closes
 * it. Whatever that caller gets, the scheduler must keep serving every other (uninterrupted) caller, and the file
 * (replayed by {@link LedgerReplay}, not by asking the scheduler) must agree with what was acknowledged.
 */
@Tag("adversarial")
class InterruptedChangeAttackTest {

    private static GpuScheduler open(Path dir) {
        // many live 1 MiB shares at once: past gpu.max_shared_per_gpu's default of 48 per GPU
        return GpuScheduler.builder().inventory(GpuInventories.simulated("dgx-h100")).stateDir(dir)
                .config(GpuConfig.builder().maxSharedPerGpu(GpuConfig.MAX_SHARED_PER_GPU_LIMIT).build())
                .auditLogging(false).maintenanceInterval(Duration.ZERO).build();
    }

    private static GpuRequest one() {
        return GpuRequest.builder().shared(MemorySize.ofMebibytes(1)).build();
    }

    @Test
    void interruptedReleaseLeavesTheSchedulerServingOthers(@TempDir Path dir) throws Exception {
        try (GpuScheduler s = open(dir)) {
            Allocation a = s.allocate(one());
            AtomicReference<Object> outcome = new AtomicReference<>();
            Thread t = new Thread(() -> {
                Thread.currentThread().interrupt();
                try {
                    outcome.set(s.release(a.id()));
                } catch (RuntimeException e) {
                    outcome.set(e);
                }
            });
            t.start();
            t.join();
            assertNotNull(outcome.get());
            boolean released = Boolean.TRUE.equals(outcome.get());
            // The file agrees with the answer the interrupted caller got.
            assertEquals(!released, LedgerReplay.replay(dir.resolve("ledger")).live().contains(a.id()),
                    "interrupted release answered " + outcome.get() + " but the file says otherwise");
            // Others keep being served.
            Allocation b;
            try {
                b = s.allocate(one());
            } catch (RuntimeException e) {
                fail("after an interrupted caller's release (" + outcome.get() + "), an uninterrupted allocate"
                        + " failed: " + e, e);
                return;
            }
            assertTrue(LedgerReplay.replay(dir.resolve("ledger")).live().contains(b.id()),
                    "acknowledged allocation " + b.id() + " is not in the file");
        }
    }

    @Test
    void interruptedAllocateLeavesTheSchedulerServingOthers(@TempDir Path dir) throws Exception {
        try (GpuScheduler s = open(dir)) {
            AtomicReference<Object> outcome = new AtomicReference<>();
            Thread t = new Thread(() -> {
                Thread.currentThread().interrupt();
                try {
                    outcome.set(s.allocate(one()));
                } catch (RuntimeException e) {
                    outcome.set(e);
                }
            });
            t.start();
            t.join();
            if (outcome.get() instanceof Allocation a) {
                assertTrue(LedgerReplay.replay(dir.resolve("ledger")).live().contains(a.id()),
                        "acknowledged allocation " + a.id() + " is not in the file");
            }
            try {
                Allocation b = s.allocate(one());
                assertTrue(LedgerReplay.replay(dir.resolve("ledger")).live().contains(b.id()));
            } catch (RuntimeException e) {
                fail("after an interrupted caller's allocate (" + outcome.get() + "), an uninterrupted allocate"
                        + " failed: " + e, e);
            }
        }
    }

    @Test
    void interruptedWaitingAllocateThrowsInterruptedOrServesAndLeavesOthersServed(@TempDir Path dir) throws Exception {
        try (GpuScheduler s = open(dir)) {
            AtomicReference<Object> outcome = new AtomicReference<>();
            Thread t = new Thread(() -> {
                Thread.currentThread().interrupt();
                try {
                    outcome.set(s.allocate(one(), Duration.ofSeconds(1)));
                } catch (InterruptedException | RuntimeException e) {
                    outcome.set(e);
                }
            });
            t.start();
            t.join();
            if (outcome.get() instanceof Allocation a) {
                assertTrue(LedgerReplay.replay(dir.resolve("ledger")).live().contains(a.id()));
            }
            try {
                Allocation b = s.allocate(one());
                assertTrue(LedgerReplay.replay(dir.resolve("ledger")).live().contains(b.id()));
            } catch (RuntimeException e) {
                fail("after an interrupted allocate(request, maxWait) (" + outcome.get() + "), an uninterrupted"
                        + " allocate failed: " + e, e);
            }
        }
    }

    @Test
    void threadsInterruptedWhileQueuedForABatchDoNotBreakTheOthers(@TempDir Path dir) throws Exception {
        try (GpuScheduler s = open(dir)) {
            java.util.List<Thread> workers = new java.util.ArrayList<>();
            java.util.List<String> acked = java.util.Collections.synchronizedList(new java.util.ArrayList<>());
            java.util.List<Throwable> errors = java.util.Collections.synchronizedList(new java.util.ArrayList<>());
            for (int w = 0; w < 8; w++) {
                Thread th = new Thread(() -> {
                    for (int i = 0; i < 50; i++) {
                        try {
                            Allocation a = s.allocate(one());
                            acked.add(a.id());
                            Thread.interrupted();
                        } catch (RuntimeException e) {
                            errors.add(e);
                        }
                    }
                });
                workers.add(th);
                th.start();
            }
            // interrupt the workers while they queue (a canceller such as Future.cancel(true) does this)
            for (int k = 0; k < 40; k++) {
                workers.get(k % 8).interrupt();
                Thread.sleep(1);
            }
            for (Thread th : workers) {
                th.join();
            }
            // The file holds exactly the acknowledged allocations (none was released): a change answered with an
            // error must have left no record.
            assertEquals(new java.util.TreeSet<>(acked), new java.util.TreeSet<>(LedgerReplay.replay(
                    dir.resolve("ledger")).live()), "file vs acknowledged allocations (" + errors.size() + " errors,"
                            + " first: " + (errors.isEmpty() ? "none" : errors.get(0)) + ")");
            // Whatever the interrupted callers got, an uninterrupted caller afterwards is served.
            Allocation after;
            try {
                after = s.allocate(one());
            } catch (RuntimeException e) {
                fail("after interrupts (" + errors.size() + " errors, first: " + (errors.isEmpty() ? "none"
                        : errors.get(0)) + "), an uninterrupted allocate failed: " + e, e);
                return;
            }
            acked.add(after.id());
            assertTrue(LedgerReplay.replay(dir.resolve("ledger")).live().containsAll(acked),
                    "acknowledged allocations missing from the file");
        }
    }

    @Test
    void anAllocateFailedByAnInterruptLeavesNoRecord(@TempDir Path base) throws Exception {
        for (int round = 0; round < 40; round++) {
            Path dir = base.resolve("r" + round);
            java.util.List<String> acked = java.util.Collections.synchronizedList(new java.util.ArrayList<>());
            AtomicReference<RuntimeException> error = new AtomicReference<>();
            try (GpuScheduler s = open(dir)) {
                Thread t = new Thread(() -> {
                    for (int i = 0; i < 200; i++) {
                        try {
                            acked.add(s.allocate(one()).id());
                        } catch (RuntimeException e) {
                            error.set(e);
                            return;
                        }
                    }
                });
                t.start();
                Thread.sleep(5 + round % 20);
                t.interrupt();
                t.join();
            } catch (RuntimeException closing) {
                // closing a scheduler whose channel an interrupt closed may fail; the file is what is judged
            }
            LedgerReplay.Result r = LedgerReplay.replay(dir.resolve("ledger"));
            assertEquals(new java.util.TreeSet<>(acked), new java.util.TreeSet<>(r.live()), "round " + round
                    + ": the file's live allocations vs the acknowledged ones; the failed call got: " + error.get());
        }
    }
}
