package io.gpusched.core;

/**
 * Receives audit events from a {@link GpuScheduler}. Called on the thread that made the change, after the change is
 * visible; events of concurrent calls may interleave. An exception thrown here is logged and does not affect the
 * scheduler.
 */
@FunctionalInterface
public interface AllocationListener {
    /** @param event what happened */
    void onEvent(AllocationEvent event);

    /** @return the default listener: one structured slf4j line per event on logger {@code io.gpusched.audit} */
    static AllocationListener slf4j() {
        return Slf4jAllocationListener.INSTANCE;
    }
}
