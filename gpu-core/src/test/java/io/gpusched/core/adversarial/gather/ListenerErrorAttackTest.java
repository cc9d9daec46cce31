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
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * One listener that fails with an {@link Error} (a {@code NoClassDefFoundError} from a listener whose optional
 * dependency is missing in an embedder's deployment) must not cost the other listeners their events nor their order:
 * AllocationListener promises "an allocation's grant always comes before its release" to every listener. The checker
 * is a second, well-behaved listener's own log of what arrived.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class ListenerErrorAttackTest {

    /** Throws an Error on the first grant it is told of, and nothing after. */
    private static final class BrokenOnce implements AllocationListener {
        final AtomicBoolean thrown = new AtomicBoolean();

        @Override
        public void onEvent(AllocationEvent e) {
            if (e.type() == AllocationEvent.Type.ALLOCATED && thrown.compareAndSet(false, true)) {
                throw new NoClassDefFoundError("com/example/metrics/Counter");
            }
        }
    }

    private static List<String> attack(GpuScheduler s, List<AllocationEvent> seen) {
        List<String> problems = new ArrayList<>();
        Allocation a = null;
        try {
            a = s.allocate(GpuRequest.builder().count(1).exclusive().owner("o").build());
        } catch (Error e) {
            problems.add("allocate threw " + e + " with " + s.allocations().size()
                    + " allocation(s) made (the caller cannot release what it was not told of)");
        }
        String id = a != null ? a.id() : s.allocations().get(0).id();
        s.release(id);
        List<AllocationEvent.Type> types = new ArrayList<>();
        synchronized (seen) {
            for (AllocationEvent e : seen) {
                if (e.allocationId().equals(Optional.of(id))) {
                    types.add(e.type());
                }
            }
        }
        if (!types.equals(List.of(AllocationEvent.Type.ALLOCATED, AllocationEvent.Type.RELEASED))) {
            problems.add("the well-behaved listener saw " + id + " as " + types);
        }
        return problems;
    }

    @Test
    void anErrorInOneListenerCostsNoOtherListenerAGrantInMemory() {
        List<AllocationEvent> seen = Collections.synchronizedList(new ArrayList<>());
        try (GpuScheduler s = GpuScheduler.builder().inventory(GpuInventories.simulated("dgx-h100"))
                .auditLogging(false).maintenanceInterval(Duration.ZERO).listener(new BrokenOnce())
                .listener(seen::add).build()) {
            assertThat(attack(s, seen)).isEmpty();
        }
    }

    @Test
    void anErrorInOneListenerCostsNoOtherListenerAGrantDurable(@TempDir Path dir) {
        List<AllocationEvent> seen = Collections.synchronizedList(new ArrayList<>());
        try (GpuScheduler s = GpuScheduler.builder().inventory(GpuInventories.simulated("dgx-h100")).stateDir(dir)
                .auditLogging(false).maintenanceInterval(Duration.ZERO).listener(new BrokenOnce())
                .listener(seen::add).build()) {
            assertThat(attack(s, seen)).isEmpty();
        }
    }
}
