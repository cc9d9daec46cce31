package io.gpusched.core;

import java.time.Instant;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.OptionalLong;

/**
 * Live values of one device at one moment. A value the device does not report is empty, never {@code -1}.
 *
 * @param index              device index
 * @param utilizationPercent GPU busy time, 0 to 100
 * @param memoryUsed         device memory in use
 * @param temperatureCelsius core (NVIDIA) or edge/junction (AMD) temperature
 * @param powerWatts         board power draw
 * @param sampledAt          when the values were read
 * @param energyMillijoules  the device's total energy counter (millijoules since the driver was loaded; NVML's
 *                           {@code nvmlDeviceGetTotalEnergyConsumption}, Volta and later), where it has one
 */
public record GpuMetrics(
        int index,
        OptionalDouble utilizationPercent,
        Optional<MemorySize> memoryUsed,
        OptionalDouble temperatureCelsius,
        OptionalDouble powerWatts,
        Instant sampledAt,
        OptionalLong energyMillijoules) {

    /** Metrics without an energy counter. */
    public GpuMetrics(int index, OptionalDouble utilizationPercent, Optional<MemorySize> memoryUsed,
            OptionalDouble temperatureCelsius, OptionalDouble powerWatts, Instant sampledAt) {
        this(index, utilizationPercent, memoryUsed, temperatureCelsius, powerWatts, sampledAt, OptionalLong.empty());
    }

    /** @throws NullPointerException if a component is null */
    public GpuMetrics {
        Objects.requireNonNull(utilizationPercent, "utilizationPercent");
        Objects.requireNonNull(memoryUsed, "memoryUsed");
        Objects.requireNonNull(temperatureCelsius, "temperatureCelsius");
        Objects.requireNonNull(powerWatts, "powerWatts");
        Objects.requireNonNull(sampledAt, "sampledAt");
        Objects.requireNonNull(energyMillijoules, "energyMillijoules");
    }

    /** @return a copy with the device's total energy counter, in millijoules since the driver was loaded */
    public GpuMetrics withEnergyMillijoules(long millijoules) {
        if (millijoules < 0) {
            throw new IllegalArgumentException("energy counter must be >= 0 mJ, was " + millijoules);
        }
        return new GpuMetrics(index, utilizationPercent, memoryUsed, temperatureCelsius, powerWatts, sampledAt,
                OptionalLong.of(millijoules));
    }

    /** @return metrics with every value absent, e.g. for a device that could not be read */
    public static GpuMetrics unavailable(int index, Instant at) {
        return new GpuMetrics(index, OptionalDouble.empty(), Optional.empty(), OptionalDouble.empty(),
                OptionalDouble.empty(), at);
    }

    /** @return metrics with every value present */
    public static GpuMetrics of(int index, double utilizationPercent, MemorySize memoryUsed, double temperatureCelsius,
            double powerWatts, Instant at) {
        return new GpuMetrics(index, OptionalDouble.of(utilizationPercent), Optional.of(memoryUsed),
                OptionalDouble.of(temperatureCelsius), OptionalDouble.of(powerWatts), at);
    }
}
