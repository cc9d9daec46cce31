package io.gpusched.core;

import java.util.List;

/**
 * Receives audit events from a {@link GpuScheduler}, after the change is visible and outside the scheduler's locks,
 * one at a time and in the order the changes were applied (with a node ledger: the ledger's order, changes of other
 * processes included): an allocation's grant always comes before its release, renewal or expiry. Usually called on
 * the thread that made the change; while another thread is delivering earlier events, that thread delivers these
 * too, and the change's call may return before they are delivered. Events that are not changes (a refusal, a health
 * change) are called on the thread that saw them. A listener should not block: delivery waits for it. An exception
 * thrown here is logged and does not affect the scheduler.
 */
@FunctionalInterface
public interface AllocationListener {
    /** @param event what happened */
    void onEvent(AllocationEvent event);

    /**
     * Receives the events of one transaction together, in order (a scheduler calls this once per transaction, where
     * it calls {@link #onEvent} for a lone event). The default hands each to {@link #onEvent}, each on its own: one
     * that throws (an exception, or an error other than the JVM's own, such as a listener's linkage error) does not
     * keep the others from it (the first is thrown after them, with the rest suppressed in it). A listener that does
     * slow work per event (a forced write) may override it to do that work once for the whole transaction.
     *
     * @param events what happened, in order; not empty
     */
    default void onEvents(List<AllocationEvent> events) {
        Throwable first = null;
        for (AllocationEvent e : events) {
            try {
                onEvent(e);
            } catch (VirtualMachineError vm) {
                if (!(vm instanceof StackOverflowError)) {
                    throw vm; // out of memory, an internal error: the JVM's, not this event's
                }
                first = first(first, vm);
            } catch (RuntimeException | Error x) { // a linkage or assertion error, too, is this event's alone
                first = first(first, x);
            }
        }
        if (first instanceof RuntimeException r) {
            throw r;
        }
        if (first instanceof Error er) {
            throw er;
        }
    }

    private static Throwable first(Throwable first, Throwable next) {
        if (first == null) {
            return next;
        }
        first.addSuppressed(next);
        return first;
    }

    /** @return the default listener: one structured slf4j line per event on logger {@code io.gpusched.audit} */
    static AllocationListener slf4j() {
        return Slf4jAllocationListener.INSTANCE;
    }
}
