package io.gpusched.accounting;

import java.time.Duration;
import java.util.List;
import java.util.Optional;

/**
 * A step of the idle policy told to listeners (the console's event stream, the service's attached clients).
 *
 * @param allocationId the allocation
 * @param owner        its owner
 * @param devices      its device indices
 * @param step         the step
 * @param idleFor      how long it has been idle
 * @param message      a sentence for the holder
 */
public record IdleNotice(String allocationId, Optional<String> owner, List<Integer> devices, IdleStep step,
        Duration idleFor, String message) {
    /** Copies the list. */
    public IdleNotice {
        devices = List.copyOf(devices);
    }
}
