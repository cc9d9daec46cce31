package io.gpusched.core.sim;

import io.gpusched.core.MemorySize;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Objects;
import java.util.function.IntToDoubleFunction;
import java.util.stream.DoubleStream;

/**
 * A scripted usage pattern for a simulated GPU or process: utilization, memory and power as steps of equal length,
 * repeated for ever. Step {@code k} covers {@code [k*step, (k+1)*step)} counted from the Unix epoch, so a trace is a
 * function of the clock alone and two processes reading one node description see the same values at the same time.
 * A value read at time {@code t} is the one of the step that ends at or contains {@code t} from the left (the step
 * just before {@code t} when {@code t} is a step boundary): what a driver reports at {@code t} is what the device did
 * up to {@code t}.
 *
 * @param step        how long each value holds, at least 1 ms
 * @param utilization percent, 0 to 100, at least one value
 * @param memory      memory in use, one value per step (repeated separately from utilization); empty: none used
 * @param power       watts; empty: derived from utilization ({@link #IDLE_WATTS} + utilization share of the
 *                    difference to {@link #BUSY_WATTS})
 */
public record UsageTrace(Duration step, List<Double> utilization, List<MemorySize> memory, List<Double> power) {

    /** Power of an idle simulated GPU when a trace gives none. */
    public static final double IDLE_WATTS = 45;
    /** Power of a simulated GPU at 100 % when a trace gives none. */
    public static final double BUSY_WATTS = 300;
    /** Most values one list may hold. */
    public static final int MAX_STEPS = 100_000;

    /** @throws IllegalArgumentException for a step under 1 ms, no utilization, or values out of range */
    public UsageTrace {
        Objects.requireNonNull(step, "step");
        if (step.compareTo(Duration.ofMillis(1)) < 0) {
            throw new IllegalArgumentException("a usage trace's step must be at least 1ms, was " + step);
        }
        utilization = List.copyOf(utilization);
        memory = List.copyOf(memory);
        power = List.copyOf(power);
        if (utilization.isEmpty()) {
            throw new IllegalArgumentException("a usage trace needs at least one utilization value");
        }
        if (utilization.size() > MAX_STEPS || memory.size() > MAX_STEPS || power.size() > MAX_STEPS) {
            throw new IllegalArgumentException("a usage trace may hold at most " + MAX_STEPS + " values per list");
        }
        for (double u : utilization) {
            if (!(u >= 0 && u <= 100)) {
                throw new IllegalArgumentException("utilization must be 0 to 100 %, was " + u);
            }
        }
        for (double p : power) {
            if (!(p >= 0 && p <= 100_000)) {
                throw new IllegalArgumentException("power must be 0 to 100000 W, was " + p);
            }
        }
    }

    /** @return a trace holding these utilization values (no memory, power derived) */
    public static UsageTrace of(Duration step, double... utilization) {
        return new UsageTrace(step, DoubleStream.of(utilization).boxed().toList(), List.of(),
                List.of());
    }

    /**
     * Named patterns the demo and the simulated profiles use: {@code training} (busy, a dip every few minutes for a
     * checkpoint), {@code inference} (bursts), {@code idle} (memory held, nothing running).
     *
     * @param name   {@code training}, {@code inference} or {@code idle}
     * @param device the memory of the device it runs on (the pattern holds a share of it)
     * @return the pattern, in 10-second steps
     * @throws IllegalArgumentException for another name
     */
    public static UsageTrace preset(String name, MemorySize device) {
        long gib = Math.max(1, device.bytes() >> 30);
        Duration s = Duration.ofSeconds(10);
        return switch (name) {
            case "training" -> new UsageTrace(s, List.of(96.0, 98.0, 97.0, 95.0, 99.0, 97.0, 98.0, 96.0, 35.0, 97.0,
                    98.0, 96.0), List.of(MemorySize.ofGibibytes(gib * 85 / 100)), List.of());
            case "inference" -> new UsageTrace(s, List.of(62.0, 8.0, 0.0, 81.0, 40.0, 0.0, 12.0, 70.0),
                    List.of(MemorySize.ofGibibytes(Math.max(1, gib * 30 / 100))), List.of());
            case "idle" -> new UsageTrace(s, List.of(0.0), List.of(MemorySize.ofGibibytes(Math.max(1, gib / 8))),
                    List.of());
            default -> throw new IllegalArgumentException("unknown usage preset \"" + name
                    + "\"; valid presets are training, inference, idle");
        };
    }

    long stepNanos() {
        return step.toNanos();
    }

    /** @return the index of the step containing {@code nanos} (epoch nanoseconds) */
    long slot(long nanos) {
        return Math.floorDiv(nanos, stepNanos());
    }

    /** @return the value of step {@code slot} in a list repeated for ever */
    static <T> T at(List<T> values, long slot) {
        return values.get((int) Math.floorMod(slot, (long) values.size()));
    }

    /** @return utilization of the step before {@code t} (left limit) */
    double utilizationAt(Instant t) {
        return at(utilization, slot(nanos(t) - 1));
    }

    /** @return memory of the step before {@code t}, if the trace has memory */
    MemorySize memoryAt(Instant t) {
        return memory.isEmpty() ? MemorySize.ZERO : at(memory, slot(nanos(t) - 1));
    }

    /** @return power during step {@code slot} */
    double powerOfSlot(long slot) {
        return power.isEmpty() ? derivedPower(at(utilization, slot)) : at(power, slot);
    }

    /** @return power of the step before {@code t} */
    double powerAt(Instant t) {
        return powerOfSlot(slot(nanos(t) - 1));
    }

    /** @return the power of a GPU at this utilization when a trace gives none */
    static double derivedPower(double utilizationPercent) {
        return IDLE_WATTS + (BUSY_WATTS - IDLE_WATTS) * utilizationPercent / 100;
    }

    /**
     * @return the mean of {@code value(slot)} over {@code (from, to]} in epoch nanoseconds, exact (step by step)
     */
    double mean(long from, long to, IntToDoubleFunction valueOfSlotMod) {
        if (to <= from) {
            return valueOfSlotMod.applyAsDouble((int) Math.floorMod(slot(to - 1), (long) utilization.size()));
        }
        double sum = 0;
        long cur = from;
        long step = stepNanos();
        while (cur < to) {
            long s = Math.floorDiv(cur, step);
            long next = Math.min(to, (s + 1) * step);
            sum += valueOfSlotMod.applyAsDouble((int) Math.floorMod(s, (long) utilization.size())) * (next - cur);
            cur = next;
        }
        return sum / (to - from);
    }

    /** @return the mean utilization over {@code (from, to]} */
    double meanUtilization(Instant from, Instant to) {
        return mean(nanos(from), nanos(to), utilization::get);
    }

    static long nanos(Instant t) {
        return Math.addExact(Math.multiplyExact(t.getEpochSecond(), 1_000_000_000L), t.getNano());
    }
}
