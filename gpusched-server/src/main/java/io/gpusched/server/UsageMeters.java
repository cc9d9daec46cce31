package io.gpusched.server;

import io.gpusched.accounting.AccountingRecord.DeviceUsage;
import io.gpusched.accounting.AccountingRecord.Interval;
import io.gpusched.accounting.UsageFigures;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.DoubleAdder;

/**
 * Per-owner usage counters on {@code /metrics}, fed by the node's sampler as it writes intervals (so they advance at
 * each checkpoint, {@code gpu.accounting.checkpoint}): {@code gpusched_usage_gpu_seconds_total},
 * {@code gpusched_usage_energy_joules_total} and {@code gpusched_usage_idle_seconds_total}, each with one label,
 * {@code owner}.
 *
 * <p>Cardinality is bounded: the first {@value #MAX_OWNERS} owners seen by this process get a series of their own,
 * every later owner is counted under {@code owner="_other"}, and allocations without an owner under {@code owner=""}
 * whenever they come, so each counter has at most {@value #MAX_OWNERS} + 2 series ({@code owner=""} no owner can be,
 * since owners are never blank:
 * Prometheus reads it as the series without an owner). A slot, once given, is kept for the life of the
 * process, so every series only grows (a restart starts them over, as Prometheus counters do).
 */
final class UsageMeters {
    /** Most owners with a series of their own. */
    static final int MAX_OWNERS = 100;
    static final String OTHER = "_other";
    /** The label of allocations without an owner: empty, which no owner can be (owners are never blank). */
    static final String NO_OWNER = "";

    private final MeterRegistry registry;
    private final Map<String, Slot> slots = new LinkedHashMap<>();
    private Slot other;

    private static final class Slot {
        final DoubleAdder gpuSeconds = new DoubleAdder();
        final DoubleAdder joules = new DoubleAdder();
        final DoubleAdder idleSeconds = new DoubleAdder();
    }

    UsageMeters(MeterRegistry registry) {
        this.registry = registry;
    }

    /** Counts one interval the sampler wrote. */
    synchronized void onInterval(Interval iv) {
        String owner = iv.owner().orElse(NO_OWNER);
        Slot s = slots.get(owner);
        if (s == null) {
            // the series without an owner is not one of the MAX_OWNERS: after 100 owners it was mixed into _other,
            // where the docs say it is owner="" (review53)
            if (owner.equals(NO_OWNER) || slots.size() - (slots.containsKey(NO_OWNER) ? 1 : 0) < MAX_OWNERS
                    && !owner.equals(OTHER)) {
                s = register(owner);
                slots.put(owner, s);
            } else {
                if (other == null) {
                    other = register(OTHER);
                }
                s = other;
            }
        }
        for (DeviceUsage d : iv.devices()) {
            UsageFigures f = d.figures();
            s.gpuSeconds.add(f.heldMillis() / 1000.0);
            s.joules.add(f.energyMillijoules() / 1000.0);
            s.idleSeconds.add(f.idleMillis() / 1000.0);
        }
    }

    /** @return how many owner series each counter has */
    synchronized int series() {
        return slots.size() + (other == null ? 0 : 1);
    }

    private Slot register(String owner) {
        Slot s = new Slot();
        FunctionCounter.builder("gpusched.usage.gpu.seconds", s.gpuSeconds, DoubleAdder::sum).baseUnit("seconds")
                .tag("owner", owner).description("GPU-seconds held by allocations of this owner (grant to release)")
                .register(registry);
        FunctionCounter.builder("gpusched.usage.energy.joules", s.joules, DoubleAdder::sum)
                .tag("owner", owner).description("Energy charged to allocations of this owner, joules (part may be"
                        + " estimated: see gpusched report)")
                .register(registry);
        FunctionCounter.builder("gpusched.usage.idle.seconds", s.idleSeconds, DoubleAdder::sum)
                .tag("owner", owner).description("GPU-seconds at or below gpu.idle.threshold of this owner's"
                        + " allocations")
                .register(registry);
        return s;
    }
}
