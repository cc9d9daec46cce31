package io.gpusched.core;

import java.time.Instant;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * One audit event: an allocation made, released or refused, or a device's health changing under an allocation.
 *
 * @param type         what happened
 * @param at           when (scheduler clock)
 * @param allocationId the allocation concerned; empty for a refusal
 * @param owner        the request's owner
 * @param jobId        the request's job id
 * @param deviceUuids  devices concerned
 * @param reason       the refusal reason, for {@link Type#REJECTED}
 * @param message      a human sentence (the refusal message, the health reason)
 */
public record AllocationEvent(
        Type type,
        Instant at,
        Optional<String> allocationId,
        Optional<String> owner,
        Optional<String> jobId,
        List<String> deviceUuids,
        Optional<GpuAllocationException.Reason> reason,
        String message) {

    /** Event types. */
    public enum Type {
        /** Devices were handed out. */
        ALLOCATED,
        /** An allocation was released. */
        RELEASED,
        /** A request was refused. */
        REJECTED,
        /**
         * A device changed health: one event for each live allocation holding it, or one without an allocation id when
         * none holds it.
         */
        HEALTH_CHANGED,
        /** An allocation's lease ran out (the host should stop its job). */
        EXPIRED,
        /** An allocation's lease was extended. */
        RENEWED,
        /** A released device has no process left and is free again. */
        DRAINED,
        /** A released device kept processes past the drain timeout and was taken out of the pool. */
        QUARANTINED,
        /**
         * An allocation bound to a holder process ({@link GpuRequest#holder()}) was released because that process is
         * gone; the message names the dead holder.
         */
        RECLAIMED,
        /**
         * An allocation that must end (its holder is gone, or its lease ended and ends it) is kept held: the processes
         * of its job cgroup ({@link GpuRequest#jobCgroup()}) could not be ended; the message says why and what to do.
         */
        RECLAIM_BLOCKED
    }

    /** Copies the list. */
    public AllocationEvent {
        Objects.requireNonNull(type, "type");
        Objects.requireNonNull(at, "at");
        deviceUuids = List.copyOf(deviceUuids);
        Objects.requireNonNull(message, "message");
    }
}
