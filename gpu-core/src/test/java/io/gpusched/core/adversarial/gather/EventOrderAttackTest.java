package io.gpusched.core.adversarial.gather;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationEvent;
import io.gpusched.core.AllocationListener;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Listeners see changes in the order they were applied. With a node ledger, one thread writes a batch of many
 * threads' changes and the threads then leave in any order: an allocation granted in one batch and released (by the
 * thread it was granted to, which returned as soon as its change was durable) in the next must still reach a listener
 * granted first. A listener that saw the release first (the accounting sampler) lost the allocation's record. The
 * checker here is the listener's own log of what arrived, judged per allocation id.
 */
@Tag("adversarial")
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class EventOrderAttackTest {

    /**
     * What a listener saw, in arrival order; synchronized, so arrival order is one order. It takes a moment over each
     * grant, as a listener that writes (the accounting sampler) does: the wider the window in which a thread that
     * delivers a batch's events is still at it, the likelier a later batch's thread delivers its own first.
     */
    private static final class Seen implements AllocationListener {
        final List<AllocationEvent> events = Collections.synchronizedList(new ArrayList<>());
        final long slowNanos;

        Seen(long slowNanos) {
            this.slowNanos = slowNanos;
        }

        @Override
        public void onEvent(AllocationEvent e) {
            if (e.type() == AllocationEvent.Type.ALLOCATED) {
                LockSupport.parkNanos(slowNanos);
            }
            events.add(e);
        }

        /** @return each allocation's event types, in the order they arrived */
        Map<String, List<AllocationEvent.Type>> byId() {
            Map<String, List<AllocationEvent.Type>> out = new HashMap<>();
            synchronized (events) {
                for (AllocationEvent e : events) {
                    e.allocationId().ifPresent(id -> out.computeIfAbsent(id, k -> new ArrayList<>()).add(e.type()));
                }
            }
            return out;
        }
    }

    private static void run(int threads, int pairs, GpuScheduler s, List<String> granted, List<Throwable> errors)
            throws InterruptedException {
        List<Thread> ts = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            Thread th = new Thread(() -> {
                try {
                    for (int i = 0; i < pairs; i++) {
                        Allocation a = s.allocate(GpuRequest.builder().count(1).exclusive().owner("o").build(),
                                Duration.ofSeconds(60));
                        granted.add(a.id());
                        s.release(a.id());
                    }
                } catch (InterruptedException | RuntimeException e) {
                    errors.add(e);
                }
            });
            ts.add(th);
            th.start();
        }
        for (Thread th : ts) {
            th.join();
        }
    }

    private static void assertGrantedBeforeReleased(Seen seen, List<String> granted) {
        Map<String, List<AllocationEvent.Type>> byId = seen.byId();
        List<String> wrong = new ArrayList<>();
        for (String id : granted) {
            List<AllocationEvent.Type> types = byId.getOrDefault(id, List.of());
            if (!types.equals(List.of(AllocationEvent.Type.ALLOCATED, AllocationEvent.Type.RELEASED))) {
                wrong.add(id + " " + types);
            }
        }
        assertThat(wrong).as("allocations whose events did not arrive as [ALLOCATED, RELEASED], of "
                + granted.size()).isEmpty();
    }

    @Test
    void aDurableSchedulersListenersSeeEachGrantBeforeItsRelease(@TempDir Path dir) throws Exception {
        Seen seen = new Seen(1_000_000);
        List<String> granted = Collections.synchronizedList(new ArrayList<>());
        List<Throwable> errors = Collections.synchronizedList(new ArrayList<>());
        try (GpuScheduler s = GpuScheduler.builder().inventory(GpuInventories.simulated("dgx-h100")).stateDir(dir)
                .auditLogging(false).maintenanceInterval(Duration.ZERO).listener(seen).build()) {
            for (int round = 0; round < 2; round++) {
                run(8, 40, s, granted, errors);
            }
        }
        assertThat(errors).isEmpty();
        assertThat(granted).hasSize(2 * 8 * 40);
        assertGrantedBeforeReleased(seen, granted);
    }

    /**
     * In memory, a change is visible to other threads once its lock is left, before its thread delivers its events:
     * here a reaper releases what it sees live, whoever was granted it, while the grant's thread is still delivering.
     */
    @Test
    void anInMemorySchedulersListenersSeeEachGrantBeforeItsReleaseByAnotherThread() throws Exception {
        Seen seen = new Seen(300_000);
        List<String> granted = Collections.synchronizedList(new ArrayList<>());
        List<Throwable> errors = Collections.synchronizedList(new ArrayList<>());
        try (GpuScheduler s = GpuScheduler.builder().inventory(GpuInventories.simulated("dgx-h100"))
                .auditLogging(false).maintenanceInterval(Duration.ZERO).listener(seen).build()) {
            AtomicBoolean stop = new AtomicBoolean();
            Thread reaper = new Thread(() -> {
                while (!stop.get()) {
                    for (Allocation a : s.allocations()) {
                        s.release(a.id());
                    }
                }
            });
            reaper.start();
            List<Thread> ts = new ArrayList<>();
            for (int t = 0; t < 8; t++) {
                Thread th = new Thread(() -> {
                    try {
                        for (int i = 0; i < 200; i++) {
                            granted.add(s.allocate(GpuRequest.builder().count(1).exclusive().owner("o").build(),
                                    Duration.ofSeconds(60)).id());
                        }
                    } catch (InterruptedException | RuntimeException e) {
                        errors.add(e);
                    }
                });
                ts.add(th);
                th.start();
            }
            for (Thread th : ts) {
                th.join();
            }
            while (!s.allocations().isEmpty()) {
                Thread.onSpinWait();
            }
            stop.set(true);
            reaper.join();
        }
        assertThat(errors).isEmpty();
        assertGrantedBeforeReleased(seen, granted);
    }

    /**
     * A listener that changes the ledger itself (it releases what it is told was granted to one owner): its change's
     * events come after the ones it is being given, nothing waits for itself, and every allocation ends.
     */
    @Test
    void aListenerThatReleasesWhatWasGrantedSeesItInOrderAndNothingHangs(@TempDir Path dir) throws Exception {
        Seen seen = new Seen(300_000);
        AtomicInteger releasedByListener = new AtomicInteger();
        GpuScheduler[] ref = new GpuScheduler[1];
        List<String> granted = Collections.synchronizedList(new ArrayList<>());
        List<Throwable> errors = Collections.synchronizedList(new ArrayList<>());
        try (GpuScheduler s = GpuScheduler.builder().inventory(GpuInventories.simulated("dgx-h100")).stateDir(dir)
                .auditLogging(false).maintenanceInterval(Duration.ZERO).listener(e -> {
                    seen.onEvent(e);
                    if (e.type() == AllocationEvent.Type.ALLOCATED && e.owner().orElse("").equals("listener")
                            && ref[0].release(e.allocationId().orElseThrow())) {
                        releasedByListener.incrementAndGet();
                    }
                }).build()) {
            ref[0] = s;
            List<Thread> ts = new ArrayList<>();
            for (int t = 0; t < 6; t++) {
                Thread th = new Thread(() -> {
                    try {
                        for (int i = 0; i < 30; i++) {
                            granted.add(s.allocate(GpuRequest.builder().count(1).exclusive().owner("listener")
                                    .build(), Duration.ofSeconds(60)).id());
                        }
                    } catch (InterruptedException | RuntimeException e) {
                        errors.add(e);
                    }
                });
                ts.add(th);
                th.start();
            }
            for (Thread th : ts) {
                th.join();
            }
            assertThat(errors).isEmpty();
            assertThat(s.allocations()).as("what the listener did not release").isEmpty();
        }
        assertThat(releasedByListener).hasValue(6 * 30);
        assertGrantedBeforeReleased(seen, granted);
    }
}
