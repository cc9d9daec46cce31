package io.gpusched.accounting;

import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.Set;

/**
 * {@code gpu.idle.*}: when an allocation whose GPUs stay idle is flagged, warned and acted on.
 * <pre>
 * gpu:
 *   idle:
 *     threshold: 1          # percent SM utilization at or below which a GPU is idle
 *     window: 30m           # idle this long: flagged (event, console, status, report)
 *     warn_after: 60m       # idle this long: the holder is warned (event, attached client, hook)
 *     act_after: 120m       # idle this long (and warned at least grace before): the action
 *     action: warn          # none | warn | release | signal
 *     signal: TERM          # for action signal: INT TERM KILL HUP USR1 USR2 QUIT
 *     grace: 15m            # the least time between the warning and the action
 *     exempt_owners: []     # never warned or acted on (still flagged)
 *     dry_run: false        # audit what would be done, do nothing
 *     hook: []              # argv run on each warning and action, e.g. [/usr/local/bin/idle-mail, "{owner}"]
 * </pre>
 * An allocation is idle only while every GPU of it has a utilization figure at or below the threshold: a GPU whose
 * utilization is not measured (MIG) is never judged idle, so nothing is reclaimed on a guess. Busy again at any sweep
 * resets its clock (audited as {@link IdleStep#BUSY_AGAIN} when it had been flagged).
 *
 * @param threshold    percent, 0 to 100
 * @param window       idle time before it is flagged
 * @param warnAfter    idle time before the warning, at least {@code window}
 * @param actAfter     idle time before the action, at least {@code warnAfter}
 * @param action       what is done at {@code actAfter}
 * @param signal       the signal for {@link Action#SIGNAL}
 * @param grace        least time between the warning and the action
 * @param exemptOwners owners never warned or acted on
 * @param dryRun       audit only
 * @param hook         a command (argv, no shell; placeholders {@code {allocation}}, {@code {owner}}, {@code {step}},
 *                     {@code {idle}} replaced in whole arguments) run on each warning and action; empty: none
 */
public record IdlePolicy(double threshold, Duration window, Duration warnAfter, Duration actAfter, Action action,
        String signal, Duration grace, List<String> exemptOwners, boolean dryRun, List<String> hook) {

    /** What happens to an allocation idle for {@code act_after}. */
    public enum Action {
        /** Flagged only. */
        NONE,
        /** Flagged and warned, never acted on. */
        WARN,
        /** Warned, then released. */
        RELEASE,
        /** Warned, then the holder (or its job's processes) gets {@link IdlePolicy#signal()}. */
        SIGNAL;

        /** @throws IllegalArgumentException naming the valid actions */
        public static Action parse(String s) {
            try {
                return valueOf(s.strip().toUpperCase(Locale.ROOT));
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException("\"" + s + "\" is not an action; valid: none, warn, release,"
                        + " signal");
            }
        }
    }

    /** Signals an idle action may send. */
    public static final Set<String> SIGNALS = Set.of("INT", "TERM", "KILL", "HUP", "USR1", "USR2", "QUIT");
    /** Most hook arguments. */
    public static final int MAX_HOOK_ARGS = 32;

    /** @throws IllegalArgumentException naming the setting and what is valid */
    public IdlePolicy {
        if (!(threshold >= 0 && threshold <= 100)) {
            throw new IllegalArgumentException("gpu.idle.threshold must be 0 to 100 (percent), was " + threshold);
        }
        Objects.requireNonNull(window, "window");
        Objects.requireNonNull(warnAfter, "warnAfter");
        Objects.requireNonNull(actAfter, "actAfter");
        Objects.requireNonNull(action, "action");
        Objects.requireNonNull(grace, "grace");
        if (window.isNegative() || window.isZero()) {
            throw new IllegalArgumentException("gpu.idle.window must be positive, was " + window);
        }
        if (warnAfter.compareTo(window) < 0 || actAfter.compareTo(warnAfter) < 0 || grace.isNegative()) {
            throw new IllegalArgumentException("gpu.idle: expected window <= warn_after <= act_after and grace >= 0;"
                    + " got window " + window + ", warn_after " + warnAfter + ", act_after " + actAfter + ", grace "
                    + grace);
        }
        if (!SIGNALS.contains(signal)) {
            throw new IllegalArgumentException("gpu.idle.signal \"" + signal + "\" is not one of " + SIGNALS);
        }
        exemptOwners = List.copyOf(exemptOwners);
        hook = List.copyOf(hook);
        if (hook.size() > MAX_HOOK_ARGS) {
            throw new IllegalArgumentException("gpu.idle.hook has " + hook.size() + " arguments; at most "
                    + MAX_HOOK_ARGS);
        }
        if (!hook.isEmpty() && !hook.get(0).startsWith("/")) {
            throw new IllegalArgumentException("gpu.idle.hook[0] \"" + hook.get(0) + "\" must be an absolute path"
                    + " (the hook is run without a shell and without a search path)");
        }
        for (String h : hook) {
            if (h.indexOf('\0') >= 0 || h.length() > 4096) {
                throw new IllegalArgumentException("gpu.idle.hook: an argument holds a NUL or is over 4096"
                        + " characters");
            }
        }
    }

    /** @return the defaults: threshold 1 %, flagged at 30 min, warned at 60, action warn, 15 min grace */
    public static IdlePolicy defaults() {
        return new IdlePolicy(1, Duration.ofMinutes(30), Duration.ofMinutes(60), Duration.ofMinutes(120),
                Action.WARN, "TERM", Duration.ofMinutes(15), List.of(), false, List.of());
    }

    /** @return whether the owner is exempt */
    public boolean exempt(String owner) {
        return owner != null && exemptOwners.contains(owner);
    }
}
