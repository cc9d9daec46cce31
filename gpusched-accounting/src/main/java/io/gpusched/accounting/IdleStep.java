package io.gpusched.accounting;

/** A step of the idle policy, as audited in the store. */
public enum IdleStep {
    /** Idle for the policy's window: shown in events, the console, {@code status} and {@code report}. */
    FLAGGED,
    /** The holder was warned (event, attached client, hook). */
    WARNED,
    /** The allocation was released. */
    RELEASED,
    /** The holder (or the job's processes) got the configured signal. */
    SIGNALLED,
    /** Dry run: what would have been done, and nothing was. */
    DRY_RUN,
    /** Busy again before any action: left alone, the clock starts over. */
    BUSY_AGAIN,
    /**
     * Its idle clock started over after time no sweep measured (a suspended host): flagged and warned again before
     * any action; a warning before it no longer counts.
     */
    STARTED_OVER,
    /** Not acted on, and why (an exempt owner, a hook not run as root on a user's behalf, nothing to signal). */
    SKIPPED,
    /** An action that was tried and failed, and why. */
    FAILED
}
