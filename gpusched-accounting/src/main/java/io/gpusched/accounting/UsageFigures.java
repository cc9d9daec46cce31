package io.gpusched.accounting;

import java.util.OptionalDouble;
import java.util.OptionalLong;

/**
 * What one allocation did with one GPU over some time, or a sum of such figures (a day, an owner, a report's row).
 * Every figure adds up across intervals ({@link #add}); peaks take the maximum. Times are milliseconds.
 *
 * <ul>
 *   <li>{@link #heldMillis()}: GPU-time held, grant to release (GPU-seconds / 1000): from the ledger's times, so
 *       exact whether or not anything was sampled.</li>
 *   <li>{@link #measuredMillis()}: the part of it a sample covers (the sampler saw the allocation and the device).</li>
 *   <li>{@link #utilizationMillis()}: the part with a utilization figure (none on MIG, none on a shared GPU whose
 *       backend cannot list processes); the mean and the idle time are over this part only.</li>
 *   <li>{@link #energyMillijoules()}: energy charged, over {@link #energyMillis()}; {@link #estimatedMillijoules()} is
 *       the part of it that was estimated (power samples times time, or a shared GPU's energy split by each holder's
 *       share of SM utilization), the rest is the driver's energy counter's own delta.</li>
 * </ul>
 * Mutable, for the sampler's and the reports' accumulators; not thread-safe.
 */
public final class UsageFigures {
    long heldMillis;
    long measuredMillis;
    long utilizationMillis;
    double utilizationPercentMillis;
    double utilizationPeak = -1;
    long idleMillis;
    long memoryPeakBytes = -1;
    long energyMillijoules;
    long estimatedMillijoules;
    long energyMillis;

    /** An empty figure. */
    public UsageFigures() {
    }

    /** @return a copy */
    public UsageFigures copy() {
        UsageFigures c = new UsageFigures();
        c.add(this);
        return c;
    }

    /** Adds another figure into this one (sums, and the larger peak). @return this */
    public UsageFigures add(UsageFigures o) {
        heldMillis = sum(heldMillis, o.heldMillis);
        measuredMillis = sum(measuredMillis, o.measuredMillis);
        utilizationMillis = sum(utilizationMillis, o.utilizationMillis);
        utilizationPercentMillis += o.utilizationPercentMillis;
        utilizationPeak = Math.max(utilizationPeak, o.utilizationPeak);
        idleMillis = sum(idleMillis, o.idleMillis);
        memoryPeakBytes = Math.max(memoryPeakBytes, o.memoryPeakBytes);
        energyMillijoules = sum(energyMillijoules, o.energyMillijoules);
        estimatedMillijoules = sum(estimatedMillijoules, o.estimatedMillijoules);
        energyMillis = sum(energyMillis, o.energyMillis);
        return this;
    }

    /** @return a + b of two non-negative figures, at most {@link Long#MAX_VALUE} (never wrapped to a negative) */
    private static long sum(long a, long b) {
        long r = a + b;
        return ((a ^ r) & (b ^ r)) < 0 ? Long.MAX_VALUE : r;
    }

    /**
     * Scales the additive figures by {@code f} (0 to 1), for the part of an interval inside a report's period; peaks
     * stay as they are.
     *
     * @return this
     */
    UsageFigures scale(double f) {
        heldMillis = Math.round(heldMillis * f);
        measuredMillis = Math.round(measuredMillis * f);
        utilizationMillis = Math.round(utilizationMillis * f);
        // at most 100 % of the rounded utilization time: a record the meter writes is one the reader accepts
        // (RecordCodec: us <= 100 x um; review28)
        utilizationPercentMillis = Math.min(utilizationPercentMillis * f, 100.0 * utilizationMillis);
        idleMillis = Math.round(idleMillis * f);
        energyMillijoules = Math.round(energyMillijoules * f);
        estimatedMillijoules = Math.round(estimatedMillijoules * f);
        energyMillis = Math.round(energyMillis * f);
        return this;
    }

    /** @return GPU-milliseconds held (grant to release) */
    public long heldMillis() {
        return heldMillis;
    }

    /** @return GPU-seconds held */
    public double gpuSeconds() {
        return heldMillis / 1000.0;
    }

    /** @return milliseconds a sample covers */
    public long measuredMillis() {
        return measuredMillis;
    }

    /** @return milliseconds with a utilization figure */
    public long utilizationMillis() {
        return utilizationMillis;
    }

    /** @return the sum of utilization percent times milliseconds (the mean's numerator) */
    public double utilizationPercentMillis() {
        return utilizationPercentMillis;
    }

    /** @return SM utilization, time-weighted mean over {@link #utilizationMillis()}; empty where none was measured */
    public OptionalDouble meanUtilization() {
        return utilizationMillis > 0 ? OptionalDouble.of(utilizationPercentMillis / utilizationMillis)
                : OptionalDouble.empty();
    }

    /** @return the highest utilization sampled; empty where none was measured */
    public OptionalDouble peakUtilization() {
        return utilizationPeak >= 0 ? OptionalDouble.of(utilizationPeak) : OptionalDouble.empty();
    }

    /** @return milliseconds at or below the idle threshold (within {@link #utilizationMillis()}) */
    public long idleMillis() {
        return idleMillis;
    }

    /** @return the idle share of the measured utilization time, 0 to 1; empty where none was measured */
    public OptionalDouble idleFraction() {
        return utilizationMillis > 0 ? OptionalDouble.of((double) idleMillis / utilizationMillis)
                : OptionalDouble.empty();
    }

    /** @return the most device memory in use sampled; empty where none was measured */
    public OptionalLong memoryPeakBytes() {
        return memoryPeakBytes >= 0 ? OptionalLong.of(memoryPeakBytes) : OptionalLong.empty();
    }

    /** @return energy charged, in millijoules (0 where none was measured: see {@link #energyMillis()}) */
    public long energyMillijoules() {
        return energyMillijoules;
    }

    /** @return the estimated part of {@link #energyMillijoules()} */
    public long estimatedMillijoules() {
        return estimatedMillijoules;
    }

    /** @return milliseconds an energy figure covers */
    public long energyMillis() {
        return energyMillis;
    }

    /** @return whether any of the energy is an estimate */
    public boolean energyEstimated() {
        return estimatedMillijoules > 0;
    }

    /** @return energy in kilowatt-hours */
    public double kilowattHours() {
        return energyMillijoules / 3.6e9;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof UsageFigures f && f.heldMillis == heldMillis && f.measuredMillis == measuredMillis
                && f.utilizationMillis == utilizationMillis
                && Double.compare(f.utilizationPercentMillis, utilizationPercentMillis) == 0
                && Double.compare(f.utilizationPeak, utilizationPeak) == 0 && f.idleMillis == idleMillis
                && f.memoryPeakBytes == memoryPeakBytes && f.energyMillijoules == energyMillijoules
                && f.estimatedMillijoules == estimatedMillijoules && f.energyMillis == energyMillis;
    }

    @Override
    public int hashCode() {
        return Long.hashCode(heldMillis * 31 + energyMillijoules) ^ Double.hashCode(utilizationPercentMillis);
    }

    @Override
    public String toString() {
        return "UsageFigures[held " + heldMillis + " ms, measured " + measuredMillis + " ms, util " + meanUtilization()
                + " peak " + peakUtilization() + " over " + utilizationMillis + " ms, idle " + idleMillis
                + " ms, mem peak " + memoryPeakBytes + ", energy " + energyMillijoules + " mJ (" + estimatedMillijoules
                + " estimated) over " + energyMillis + " ms]";
    }
}
