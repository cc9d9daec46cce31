package io.gpusched.core;

import java.util.Optional;

/**
 * Service-provider interface for inventory backends, found with {@link java.util.ServiceLoader}
 * ({@code META-INF/services/io.gpusched.core.GpuInventoryProvider}). Probing is cheap and never throws: a missing
 * library or driver is an unavailability cause, not an exception.
 */
public interface GpuInventoryProvider {

    /** @return short stable name used in configuration ({@code "nvml"}, {@code "procfs"}, {@code "rocm-smi"}) */
    String name();

    /** @return higher wins when several providers are available */
    int priority();

    /** @return one line saying why this provider cannot serve on this host, or empty when it can */
    Optional<String> unavailabilityCause();

    /** @return true when {@link #unavailabilityCause()} is empty */
    default boolean isAvailable() {
        return unavailabilityCause().isEmpty();
    }

    /**
     * Opens an inventory.
     *
     * @param config the validated configuration
     * @throws BackendUnavailableException if the backend turns out unusable while opening
     */
    GpuInventory open(GpuConfig config);
}
