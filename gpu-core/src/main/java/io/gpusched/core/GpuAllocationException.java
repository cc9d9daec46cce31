package io.gpusched.core;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
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

    /**
     * One device that stood in a refused request's way. The message names only the first few of a large node's
     * obstacles (counts by kind, then the first ids); {@link #obstacles()} keeps every one.
     *
     * @param deviceIndex the device's index
     * @param uuid        its UUID
     * @param kind        what kept it from the request
     * @param detail      the holder's allocation id, the health or pool reason; empty when there is none
     */
    public record Obstacle(int deviceIndex, String uuid, Kind kind, String detail) {

        /** What kept a device from a request. */
        public enum Kind {
            /** Held by an exclusive allocation ({@code detail}: its id). */
            HELD,
            /** Shared allocations leave it too little memory or too few slots ({@code detail}: how many, left). */
            SHARED,
            /** Released, waiting for its last job's processes to exit ({@code detail}: why). */
            DRAINING,
            /** Not healthy ({@code detail}: its health). */
            UNHEALTHY,
            /** Out of the pool until an admin clears it ({@code detail}: why). */
            QUARANTINED
        }

        /** @throws NullPointerException if a field is null */
        public Obstacle {
            Objects.requireNonNull(uuid, "uuid");
            Objects.requireNonNull(kind, "kind");
            Objects.requireNonNull(detail, "detail");
        }

        /**
         * @return this obstacle as the node service and the console send it in a refusal's {@code obstacles}:
         *     {@code deviceIndex}, {@code uuid}, {@code kind}, {@code detail}
         */
        public Map<String, Object> toMap() {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("deviceIndex", deviceIndex);
            m.put("uuid", uuid);
            m.put("kind", kind.name());
            m.put("detail", detail);
            return m;
        }
    }

    private final Reason reason;
    private final List<Obstacle> obstacles;

    /**
     * @param reason  machine-readable reason
     * @param message a sentence a user can act on
     */
    public GpuAllocationException(Reason reason, String message) {
        this(reason, message, List.of());
    }

    /**
     * @param reason    machine-readable reason
     * @param message   a sentence a user can act on (bounded: it summarizes a long list of obstacles)
     * @param obstacles every device that stood in the way, in node order
     */
    public GpuAllocationException(Reason reason, String message, List<Obstacle> obstacles) {
        super(message);
        this.reason = Objects.requireNonNull(reason, "reason");
        this.obstacles = List.copyOf(obstacles);
    }

    /** @return why the request was refused */
    public Reason reason() {
        return reason;
    }

    /**
     * @return every device that stood in the request's way, in node order (the message may name only the first
     *         few); empty when the refusal is not about particular devices, or came over the wire
     */
    public List<Obstacle> obstacles() {
        return obstacles;
    }
}
