package io.gpusched.core;

import java.util.Objects;

/**
 * An allocation request could not be served. The {@link Reason} is for programs, the message for people: it says
 * what was asked, what the node has, and so what would succeed.
 */
public class GpuAllocationException extends GpuException {

    /** Why a request was refused. */
    public enum Reason {
        /** Enough devices match the request, but not enough of them are free now. */
        INSUFFICIENT_GPUS(true),
        /** More GPUs were asked for than the node has in all: the request can never be served here. */
        NODE_TOO_SMALL(false),
        /** Devices match vendor, model and capability, but too few have the memory asked for. */
        INSUFFICIENT_MEMORY(false),
        /** Too few devices on this node match the vendor, model or compute capability asked for. */
        NO_MATCHING_DEVICE(false),
        /** An explicitly requested device index or UUID is not on this node. */
        UNKNOWN_DEVICE(false),
        /** An explicitly requested device is held by another allocation. */
        DEVICE_BUSY(true),
        /** The request can only be served by devices that are unhealthy or lost. */
        DEVICE_UNHEALTHY(true),
        /** The request breaks a rule of this scheduler's configuration (size limit, sharing disabled). */
        INVALID_REQUEST(false),
        /** The scheduler is disabled by configuration ({@code gpu.enabled: false}). */
        DISABLED(false),
        /** The allocation strategy found no placement among the eligible devices. */
        NO_PLACEMENT(true),
        /** {@code release} or {@code renew} was given an id the node never issued. */
        UNKNOWN_ALLOCATION(false),
        /**
         * The owner was granted allocations more often than its rate limit allows ({@code gpu.rate_limit}). Only
         * granted allocations spend tokens; refusals (this one included) do not.
         */
        RATE_LIMITED(true),
        /**
         * {@code release} was refused: the allocation's job cgroup ({@link GpuRequest#jobCgroup()}) still has
         * processes, which would keep using GPUs the next caller gets; end the job (its host releases the allocation
         * then), or let a reclaim end it.
         */
        JOB_RUNNING(false),
        /**
         * The owner already holds as many GPUs as their quota allows ({@code gpu.users}); the message names the limit,
         * where it comes from and what the owner holds. Transient: it may succeed once the owner releases.
         */
        QUOTA_EXCEEDED(true);

        private final boolean transientCondition;

        Reason(boolean transientCondition) {
            this.transientCondition = transientCondition;
        }

        /**
         * @return true when the same request may succeed later without changing it (devices get released or recover)
         */
        public boolean isTransient() {
            return transientCondition;
        }
    }

    private final Reason reason;

    /**
     * @param reason  machine-readable reason
     * @param message a sentence a user can act on
     */
    public GpuAllocationException(Reason reason, String message) {
        super(message);
        this.reason = Objects.requireNonNull(reason, "reason");
    }

    /** @return why the request was refused */
    public Reason reason() {
        return reason;
    }
}
