package io.gpusched.accounting;

import io.gpusched.core.Allocation;
import java.time.Duration;
import java.util.List;

/**
 * What the idle policy does to the world, behind one interface so that {@link IdleWatch} is pure and tested against a
 * manual clock: {@link HostIdleEffects} is the real one (the scheduler's release, {@code kill}, the hook command).
 */
public interface IdleEffects {

    /**
     * Tells whoever listens (events, the console, an attached client) about a step of the policy. Never throws.
     *
     * @param allocation the allocation
     * @param step       the step
     * @param idleFor    how long it has been idle
     * @param message    a sentence for the holder
     */
    void notify(Allocation allocation, IdleStep step, Duration idleFor, String message);

    /**
     * Releases the allocation.
     *
     * @return a sentence for the audit
     * @throws RuntimeException when it could not be released (audited as {@link IdleStep#FAILED})
     */
    String release(Allocation allocation);

    /**
     * Sends a signal to the allocation's job (its job cgroup's processes) or its holder process.
     *
     * @param signal one of {@link IdlePolicy#SIGNALS}
     * @return a sentence for the audit (what got it)
     * @throws RuntimeException when there is nothing to signal or the signal failed
     */
    String signal(Allocation allocation, String signal);

    /**
     * Runs the policy's hook for a step.
     *
     * @param argv the hook's arguments, placeholders replaced
     * @return a sentence for the audit (its exit status, or why it was not run)
     */
    String runHook(Allocation allocation, List<String> argv);
}
