package io.gpusched.core;

import java.time.Instant;
import java.util.Objects;
import java.util.Optional;

/**
 * A device as the scheduler holds it at one moment: its facts, health, who holds it and its latest metrics.
 *
 * @param device          the device
 * @param health          its health
 * @param exclusiveHolder id of the exclusive allocation holding it
 * @param sharedHolders   number of shared allocations on it
 * @param sharedReserved  memory reserved by those shared allocations
 * @param metrics         latest sample for it, if any
 * @param pool            whether it is in the pool, draining after a release, or quarantined
 * @param poolReason      why it is draining or quarantined
 * @param poolSince       since when
 */
public record DeviceState(
        GpuDevice device,
        GpuHealth health,
        Optional<String> exclusiveHolder,
        int sharedHolders,
        MemorySize sharedReserved,
        Optional<GpuMetrics> metrics,
        Pool pool,
        Optional<String> poolReason,
        Optional<Instant> poolSince) {

    /** Where a device stands with respect to the pool. */
    public enum Pool {
        /** In the pool (free or held). */
        IN_POOL,
        /** Released, waiting for its processes to exit. */
        DRAINING,
        /** Kept processes past the drain timeout; out of the pool until cleared. */
        QUARANTINED,
        /**
         * Taken out of service by an admin ({@link GpuScheduler#drain}): takes no new allocation until undrained; an
         * allocation holding it keeps it until released.
         */
        CORDONED
    }

    /** @throws IllegalArgumentException if the state is inconsistent */
    public DeviceState {
        Objects.requireNonNull(device, "device");
        Objects.requireNonNull(health, "health");
        Objects.requireNonNull(exclusiveHolder, "exclusiveHolder");
        Objects.requireNonNull(sharedReserved, "sharedReserved");
        Objects.requireNonNull(metrics, "metrics");
        Objects.requireNonNull(pool, "pool");
        Objects.requireNonNull(poolReason, "poolReason");
        Objects.requireNonNull(poolSince, "poolSince");
        if (exclusiveHolder.isPresent() && sharedHolders > 0) {
            throw new IllegalArgumentException("device " + device.uuid() + " cannot be held exclusively and shared");
        }
        if (sharedHolders < 0 || (sharedHolders == 0) != (sharedReserved.bytes() == 0)) {
            throw new IllegalArgumentException("device " + device.uuid() + ": " + sharedHolders
                    + " shared holders but " + sharedReserved + " reserved");
        }
    }

    /** @return the state of a device nobody holds */
    public static DeviceState idle(GpuDevice device, GpuHealth health) {
        return new DeviceState(device, health, Optional.empty(), 0, MemorySize.ZERO, Optional.empty(), Pool.IN_POOL,
                Optional.empty(), Optional.empty());
    }

    /** @return true if it may be handed out now: healthy and in the pool */
    public boolean isAllocatable() {
        return health.isHealthy() && pool == Pool.IN_POOL;
    }

    /** @return the device index */
    public int index() {
        return device.index();
    }

    /** @return true if nobody holds it, exclusively or shared */
    public boolean isIdle() {
        return exclusiveHolder.isEmpty() && sharedHolders == 0;
    }

    /** @return true if shared allocations hold it */
    public boolean isShared() {
        return sharedHolders > 0;
    }

    /** @return memory still reservable by shared allocations (total minus reserved; zero if held exclusively) */
    public MemorySize reservableMemory() {
        return exclusiveHolder.isPresent() ? MemorySize.ZERO : device.memory().minusOrZero(sharedReserved);
    }

    /** @return utilization of the latest sample, 0 when unknown */
    public double utilization() {
        return metrics.map(m -> m.utilizationPercent().orElse(0.0)).orElse(0.0);
    }

    DeviceState withHealth(GpuHealth h) {
        return new DeviceState(device, h, exclusiveHolder, sharedHolders, sharedReserved, metrics, pool, poolReason,
                poolSince);
    }

    DeviceState withExclusive(Optional<String> holder) {
        return new DeviceState(device, health, holder, sharedHolders, sharedReserved, metrics, pool, poolReason,
                poolSince);
    }

    DeviceState withShared(int holders, MemorySize reserved) {
        return new DeviceState(device, health, exclusiveHolder, holders, reserved, metrics, pool, poolReason,
                poolSince);
    }

    DeviceState withPool(Pool p, Optional<String> reason, Optional<Instant> since) {
        return new DeviceState(device, health, exclusiveHolder, sharedHolders, sharedReserved, metrics, p, reason,
                since);
    }

    DeviceState withMetrics(Optional<GpuMetrics> m) {
        return new DeviceState(device, health, exclusiveHolder, sharedHolders, sharedReserved, m, pool, poolReason,
                poolSince);
    }
}
