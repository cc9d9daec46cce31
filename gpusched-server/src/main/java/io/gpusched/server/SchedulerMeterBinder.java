package io.gpusched.server;

import io.gpusched.core.AllocationEvent;
import io.gpusched.core.AllocationListener;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuScheduler;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.binder.MeterBinder;
import java.time.Duration;
import java.util.EnumMap;
import java.util.Map;
import java.util.Objects;

/**
 * gpusched's own meters: {@code gpusched.allocations.live} (allocations live on the node), {@code
 * gpusched.refusals} (refused requests, tagged {@code reason}), {@code gpusched.allocate} (allocate latency, a timer
 * fed through {@link #recordAllocate}) and {@code gpusched.devices.allocatable}. Register this binder as the
 * scheduler's {@link AllocationListener} too, so refusals are counted ({@code GpuScheduler.builder().listener(b)}),
 * or call {@link #onEvent} yourself.
 */
public final class SchedulerMeterBinder implements MeterBinder, AllocationListener {
    private final GpuScheduler scheduler;
    private final Map<GpuAllocationException.Reason, Counter> refusals =
            new EnumMap<>(GpuAllocationException.Reason.class);
    private final Map<GpuAllocationException.Reason, Long> early = new EnumMap<>(GpuAllocationException.Reason.class);
    private volatile Timer allocate;

    /** @param scheduler the scheduler to observe (its allocations are the node's) */
    public SchedulerMeterBinder(GpuScheduler scheduler) {
        this.scheduler = Objects.requireNonNull(scheduler, "scheduler");
    }

    @Override
    public synchronized void bindTo(MeterRegistry registry) {
        Gauge.builder("gpusched.allocations.live", scheduler, s -> s.allocations().size())
                .description("Allocations live on the node").register(registry);
        Gauge.builder("gpusched.devices.allocatable", scheduler,
                        s -> s.devices().stream().filter(d -> d.isAllocatable()).count())
                .description("Devices healthy, in the pool and not held exclusively").register(registry);
        for (GpuAllocationException.Reason r : GpuAllocationException.Reason.values()) {
            Counter c = Counter.builder("gpusched.refusals").tag("reason", r.name())
                    .description("Allocation requests refused, by reason").register(registry);
            c.increment(early.getOrDefault(r, 0L));
            refusals.put(r, c);
        }
        allocate = Timer.builder("gpusched.allocate").description("Latency of allocate calls")
                .publishPercentiles(0.5, 0.99).register(registry);
    }

    @Override
    public void onEvent(AllocationEvent event) {
        if (event.type() == AllocationEvent.Type.REJECTED && event.reason().isPresent()) {
            synchronized (this) {
                Counter c = refusals.get(event.reason().get());
                if (c != null) {
                    c.increment();
                } else {
                    early.merge(event.reason().get(), 1L, Long::sum);
                }
            }
        }
    }

    /** @param latency how long one allocate call took (successful or refused) */
    public void recordAllocate(Duration latency) {
        Timer t = allocate;
        if (t != null) {
            t.record(latency);
        }
    }
}
