package io.gpusched.server;

import io.gpusched.core.AllocationEvent;
import io.gpusched.core.AllocationListener;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.LedgerStatistics;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.FunctionTimer;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.binder.MeterBinder;
import java.time.Duration;
import java.util.EnumMap;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.TimeUnit;

/**
 * gpusched's own meters: {@code gpusched.allocations.live} (allocations live on the node), {@code
 * gpusched.refusals} (refused requests, tagged {@code reason}), {@code gpusched.allocate} (allocate latency, a timer
 * fed through {@link #recordAllocate}), {@code gpusched.devices.allocatable}, and, when the scheduler keeps a node
 * ledger, {@code gpusched.ledger.force} (a function timer: count = appends forced to disk, total = time spent in the
 * force calls, from {@link GpuScheduler#ledgerStatistics()}) with {@code gpusched.ledger.force.max} (the slowest
 * single force, seconds). In Prometheus: {@code gpusched_ledger_force_seconds_count}, {@code
 * gpusched_ledger_force_seconds_sum} and {@code gpusched_ledger_force_max_seconds}; they count this process's forces
 * since its scheduler was built. Register this binder as the
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
        if (scheduler.ledgerStatistics().isPresent()) {
            FunctionTimer.builder("gpusched.ledger.force", scheduler,
                    s -> s.ledgerStatistics().map(LedgerStatistics::forces).orElse(0L),
                    s -> s.ledgerStatistics().map(LedgerStatistics::forceNanos).orElse(0L),
                    TimeUnit.NANOSECONDS)
                    .description("Appends forced to the node ledger and the time spent forcing them")
                    .register(registry);
            Gauge.builder("gpusched.ledger.force.max", scheduler,
                    s -> s.ledgerStatistics().map(l -> l.forceNanosMax() / 1e9).orElse(Double.NaN))
                    .baseUnit("seconds").description("The slowest single force of the node ledger")
                    .register(registry);
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
