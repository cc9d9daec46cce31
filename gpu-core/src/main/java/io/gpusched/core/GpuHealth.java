package io.gpusched.core;

import java.util.Objects;
import java.util.Optional;

/**
 * Whether a device may be handed out.
 *
 * @param state  healthy, unhealthy or lost
 * @param reason why it is not healthy (e.g. {@code "XID 79"}); empty when healthy
 */
public record GpuHealth(State state, Optional<String> reason) {

    /** Health states. */
    public enum State {
        /** Usable. */
        HEALTHY,
        /** Present but failing (an XID error, ECC, thermal): not handed out until it reads healthy again. */
        UNHEALTHY,
        /** Gone from the bus or the driver ({@code GPU_IS_LOST}). */
        LOST
    }

    /** A healthy device. */
    public static final GpuHealth HEALTHY = new GpuHealth(State.HEALTHY, Optional.empty());

    /** @throws IllegalArgumentException if an unhealthy state has no reason, or a healthy one has one */
    public GpuHealth {
        Objects.requireNonNull(state, "state");
        Objects.requireNonNull(reason, "reason");
        if (state == State.HEALTHY && reason.isPresent()) {
            throw new IllegalArgumentException("a healthy device has no reason");
        }
        if (state != State.HEALTHY && reason.filter(r -> !r.isBlank()).isEmpty()) {
            throw new IllegalArgumentException(state + " needs a reason");
        }
    }

    /** @return an unhealthy state with its reason */
    public static GpuHealth unhealthy(String reason) {
        return new GpuHealth(State.UNHEALTHY, Optional.of(reason));
    }

    /** @return a lost state with its reason */
    public static GpuHealth lost(String reason) {
        return new GpuHealth(State.LOST, Optional.of(reason));
    }

    /** @return true if the device may be handed out */
    public boolean isHealthy() {
        return state == State.HEALTHY;
    }

    @Override
    public String toString() {
        return reason.map(r -> state + " (" + r + ")").orElse(state.toString());
    }
}
