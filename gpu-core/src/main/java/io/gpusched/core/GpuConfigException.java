package io.gpusched.core;

/** A configuration or node description is invalid: the message names the key path and what would be valid. */
public class GpuConfigException extends GpuException {
    /** @param message names the offending key (e.g. {@code gpu.strategy}) and the accepted values */
    public GpuConfigException(String message) {
        super(message);
    }

    /**
     * @param message names the offending input
     * @param cause   the parser's error
     */
    public GpuConfigException(String message, Throwable cause) {
        super(message, cause);
    }
}
