package io.gpusched.core;

import java.util.List;

/**
 * No inventory backend could serve: thrown by detection with every provider's cause, or by a provider's {@code open}.
 */
public class BackendUnavailableException extends GpuException {
    private final List<String> causes;

    /** @param message one line saying what is unavailable and why */
    public BackendUnavailableException(String message) {
        this(message, List.of(), null);
    }

    /**
     * @param message summary line
     * @param causes  one line per provider tried ("nvml: driver not loaded (NVML 9)")
     * @param cause   underlying failure, may be null
     */
    public BackendUnavailableException(String message, List<String> causes, Throwable cause) {
        super(causes.isEmpty() ? message : message + "\n  - " + String.join("\n  - ", causes), cause);
        this.causes = List.copyOf(causes);
    }

    /** @return one line per provider that was tried, with the reason it could not serve */
    public List<String> causes() {
        return causes;
    }
}
