package io.gpusched.core.adversarial.topology;

import io.gpusched.core.AllocationStrategy;
import io.gpusched.core.DeviceState;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.SchedulingView;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The topology strategy with a gate: the first search for the owner "slow" decides, records what it picked and what
 * it saw, then holds until the test opens the gate (a search that takes as long as the test wants). Every other search
 * goes straight through. Records whether any search ever ran on a thread while another was held (for ordering).
 */
final class GateStrategy implements AllocationStrategy {
    final AllocationStrategy base;
    final CountDownLatch picked = new CountDownLatch(1);
    final CountDownLatch gate = new CountDownLatch(1);
    final AtomicBoolean used = new AtomicBoolean();
    volatile List<Integer> firstPick;
    volatile List<Integer> firstPickFreeSeen;

    GateStrategy(AllocationStrategy base) {
        this.base = base;
    }

    @Override
    public String name() {
        return "gate(" + base.name() + ")";
    }

    @Override
    public List<Integer> select(GpuRequest request, SchedulingView view) {
        return choose(request, view).devices();
    }

    @Override
    public Choice choose(GpuRequest request, SchedulingView view) {
        Choice c = base.choose(request, view);
        if (request.owner().filter("slow"::equals).isPresent() && used.compareAndSet(false, true)) {
            firstPick = List.copyOf(c.devices());
            firstPickFreeSeen = view.candidates().stream().map(DeviceState::index).toList();
            picked.countDown();
            try {
                if (!gate.await(120, TimeUnit.SECONDS)) {
                    throw new IllegalStateException("gate never opened");
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException(e);
            }
        }
        return c;
    }
}
