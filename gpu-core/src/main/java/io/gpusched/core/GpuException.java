package io.gpusched.core;

/**
 * Root of gpusched's small unchecked exception hierarchy: {@link BackendUnavailableException},
 * {@link GpuAllocationException}, {@link GpuConfigException} (and, in gpu-isolation, its isolation error).
 */
public class GpuException extends RuntimeException {
    /** @param message what went wrong, naming the input and what would be valid */
    public GpuException(String message) {
        super(message);
    }

    /**
     * @param message what went wrong
     * @param cause   the underlying failure
     */
    public GpuException(String message, Throwable cause) {
        super(message, cause);
    }
}
