package io.gpusched.isolation;

import io.gpusched.core.GpuException;

/** Fencing failed; the message names the step and the reason, and what was already written has been undone. */
public class IsolationException extends GpuException {
    /** @param message the failed step and why */
    public IsolationException(String message) {
        super(message);
    }

    /** @param message the failed step and why @param cause the underlying failure */
    public IsolationException(String message, Throwable cause) {
        super(message, cause);
    }
}
