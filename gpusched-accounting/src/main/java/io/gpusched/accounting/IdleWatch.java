package io.gpusched.accounting;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingRecord.IdleCount;
import io.gpusched.core.Allocation;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;

/**
 * The idle policy's state machine: after each sweep it is told which allocations are idle since when, and decides,
 * against the time it is given, what to flag, warn and act on ({@link IdlePolicy}). Every step is returned as an
 * {@link IdleAction} for the store (the audit) and carried out through {@link IdleEffects}.
 *
 * <p>Order, per allocation: flagged once idle for {@code window}; warned once idle for {@code warn_after} (unless the
 * action is {@code none} or the owner is exempt); acted on once idle for {@code act_after} <em>and</em> at least
 * {@code grace} of observed time after its warning, never without a warning first; an action is taken once. Idle
 * time is observed time: each sweep counts for at most 30 s or twice the shortest of the last 8 sweeps' steps,
 * whichever is more (one idle reading vouches for no more: a sweep late or a clock stepped ahead, even again and
 * again, delays the policy rather than hastens it), and nothing while the clock is behind a sweep already judged. An
 * allocation busy again before the action is left alone and its clock starts over; one that a sweep measured as
 * neither idle nor busy (a gap the meter recorded, a GPU not read) keeps its state; an idle stretch the meter
 * restarted after a gap longer than 10 minutes (the longest step the meter credits as one sweep) starts over too
 * (audited {@link IdleStep#STARTED_OVER} when it was flagged; flagged and warned again before any action). A dry run
 * audits what it would do and does nothing (no warning is sent, no hook run, nothing released or signalled).
 */
public final class IdleWatch {
    private final IdlePolicy policy;
    private final IdleEffects effects;
    private final Map<String, State> states = new HashMap<>();

    /**
     * The most one sweep's step counts as observed idle time when the sweeps before it came faster: what a poll of
     * the field's usual 30-s period (Slurm's job accounting, Run:ai's idle windows) stands for (review34).
     */
    static final long MIN_CREDIT_MILLIS = 30_000;

    private static final class State {
        /** the idle start this state counts from (kept across a short gap) */
        Instant start;
        /** the meter's idle start at the last sweep that measured it idle */
        Instant lastSince;
        /** the last sweep that measured it idle */
        Instant lastIdleAt;
        boolean flagged;
        Instant warnedAt;
        boolean acted;
        boolean exemptNoted;
        /** sweep time observed since the warning, each sweep's at most {@link #observed} (review28) */
        long sinceWarning;
        /**
         * how long it has been idle as sweeps observed it: the wall clock's idle time when first seen idle, then each
         * sweep's observed time (review33: one step ahead spent warn_after and act_after at once)
         */
        long idleObserved;
    }

    /** the latest evaluation's time (the clock stepped back leaves it where it was); null before the first */
    private Instant lastEvaluated;
    /**
     * the latest sweep the policies this one resumed from had judged (their counts' dates, and the ends of the
     * allocations' last records: {@link #judgedUpTo}), null when none
     */
    private Instant resumedJudged;
    /** the latest sweep judged by the store's checkpoint markers, null when none says (see {@link #resume}) */
    private Instant markedJudged;
    /** the last {@link #RECENT} steps forward, in ms (0: none yet): the sweeps' cadence */
    private final long[] recent = new long[RECENT];
    private int recentAt;
    /** the previous evaluation's time, judged or not (the clock behind a sweep judged); null before the first */
    private Instant lastSweep;
    /** whether the clock stepped back at the last evaluation (the next step forward counts nothing) */
    private boolean steppedBack;
    static final int RECENT = 8;

    /**
     * @param policy  the policy
     * @param effects what carries it out
     */
    public IdleWatch(IdlePolicy policy, IdleEffects effects) {
        this.policy = Objects.requireNonNull(policy, "policy");
        this.effects = Objects.requireNonNull(effects, "effects");
    }

    /** @return the policy */
    public IdlePolicy policy() {
        return policy;
    }

    /** @return the allocations flagged idle now */
    public Set<String> flagged() {
        Set<String> out = new HashSet<>();
        states.forEach((id, s) -> {
            if (s.flagged) {
                out.add(id);
            }
        });
        return out;
    }

    /**
     * @return the latest sweep this policy judged, or the one its predecessors had judged when later (the mark a sweep
     *         must pass to be judged), if any
     */
    Optional<Instant> judged() {
        if (lastEvaluated == null) {
            return Optional.ofNullable(resumedJudged);
        }
        return Optional.of(resumedJudged != null && resumedJudged.isAfter(lastEvaluated) ? resumedJudged
                : lastEvaluated);
    }

    /**
     * The policy this one continues had judged the sweep at {@code t} (the end of an allocation's last record: its
     * sweeps are judged as they are credited), whether or not an idle stretch was open then: a first sweep behind it
     * is a step back (review48: a restart behind the clock with no stretch open counted the step past it).
     */
    void judgedUpTo(Instant t) {
        if (resumedJudged == null || t.isAfter(resumedJudged)) {
            resumedJudged = t;
        }
    }

    /**
     * As {@link #judgedUpTo}, from the store's checkpoint markers ({@link AccountingRecord.Checkpoint#judged}): the
     * store is one that writes the policy's counts (see {@link #resume}).
     */
    void judgedByMarkers(Instant t) {
        markedJudged = t;
        judgedUpTo(t);
    }

    private static Instant later(Instant a, Instant b) {
        return b != null && b.isAfter(a) ? b : a;
    }

    /**
     * Continues an allocation's idle stretch from the store when this policy starts (a restarted sampler): flagged,
     * warned, acted on or noted exempt as the steps in it say, its idle time and the time since its warning the time
     * its samplers ran in it (its gaps left out). A restart within {@link UsageMeter#MAX_SWEEP_MILLIS} of the
     * stretch's last sweep continues it, as a short gap does; after a longer one it starts over, audited. Without
     * this, a sampler restarted every few minutes never reached {@code warn_after} (review36).
     *
     * @param id      the allocation
     * @param stretch its stretch in the store ({@link IdleStatus#stretches})
     */
    void resume(String id, IdleStatus.Stretch stretch) {
        if (states.containsKey(id)) {
            return;
        }
        State s = new State();
        s.start = stretch.start();
        s.lastSince = stretch.lastSince();
        s.lastIdleAt = stretch.asOf();
        // a store whose markers name the latest sweep judged is one that writes the policy's count of every stretch
        // it follows with each checkpoint: a stretch with no count had none counted by then (review52: time behind a
        // sweep judged before the clock stepped back, which the policy that ran on never counted); only what its
        // intervals hold after that sweep counts. A store written before counts were: its intervals, by the bound
        s.idleObserved = stretch.count() == null && markedJudged != null
                ? stretch.countedSince(later(stretch.start(), resumedJudged))
                : stretch.countedSince(stretch.start());
        for (IdleAction a : stretch.steps()) {
            switch (a.action()) {
                case FLAGGED -> s.flagged = true;
                case WARNED -> {
                    s.flagged = true;
                    // a warning counts only when it announced what this policy does (the settings may have changed
                    // across the restart: "nothing more will be done" is no warning of a release)
                    if (a.detail().contains(consequence())) {
                        s.warnedAt = a.at();
                    }
                }
                case DRY_RUN -> {
                    // a dry run's steps count only for a dry run (no warning was sent), and only when they said what
                    // this one would do (review44: a dry run of release stood for a dry run of signal's)
                    s.flagged = true;
                    if (policy.dryRun()) {
                        if (a.detail().startsWith(DRY_WARN)) {
                            if (a.detail().contains(consequence())) {
                                s.warnedAt = a.at();
                            }
                        } else if (a.detail().startsWith("dry run: would " + actionText())) {
                            s.acted = true;
                        }
                    }
                }
                // an action counts when it is this policy's (review42: a job signalled under action signal, the
                // action changed to release across the restart, was never released); a failed one is not retried
                case RELEASED -> s.acted |= policy.action() == IdlePolicy.Action.RELEASE;
                // and a signal only when it was this policy's signal (review43: a job that ignored SIGTERM was never
                // sent SIGKILL after the setting changed)
                case SIGNALLED -> s.acted |= policy.action() == IdlePolicy.Action.SIGNAL
                        && (a.detail().contains(SIGNAL_NAMED + policy.signal() + ")")
                                || a.detail().startsWith("sent SIG" + policy.signal() + " "));
                // a failed action is not retried, by the policy that tried it: another action is this policy's to
                // warn of and take (review43 noticed: a signal that failed blocked a release policy for good)
                case FAILED -> s.acted |= a.detail().startsWith("could not " + actionText());
                case SKIPPED -> s.exemptNoted = true;
                case BUSY_AGAIN, STARTED_OVER -> {
                    s.flagged = false;
                    s.warnedAt = null;
                    s.acted = false;
                    s.exemptNoted = false;
                }
                default -> {
                }
            }
        }
        if (s.warnedAt != null) {
            s.sinceWarning = stretch.countedSince(s.warnedAt);
        }
        IdleCount c = stretch.count();
        if (c != null && (resumedJudged == null || c.at().isAfter(resumedJudged))) {
            resumedJudged = c.at();
        }
        if (c != null) {
            // the policy's latest count of the stretch (written with a checkpoint or at its stop): exact up to its
            // time, where the intervals give a bound (review42: late sweeps and long checkpoint intervals); the
            // intervals after it (a midnight's cut written before the next checkpoint) by the bound (review43)
            long after = stretch.countedSince(c.at());
            s.idleObserved = c.idle().toMillis() + after;
            if (s.warnedAt != null && c.sinceWarning().isPresent() && !s.warnedAt.isAfter(c.at())) {
                s.sinceWarning = c.sinceWarning().get().toMillis() + after;
            }
        }
        states.put(id, s);
    }

    /**
     * @return the policy's count for each allocation it follows (in an idle stretch), for the store, dated by the
     *         latest sweep it judged (a clock stepped back or a jump it skipped does not move that: review45); none
     *         before its first sweep (what it resumed is in the store already)
     */
    List<IdleCount> counts() {
        if (states.isEmpty() || lastEvaluated == null) {
            return List.of();
        }
        Instant at = lastEvaluated;
        List<IdleCount> out = new ArrayList<>(states.size());
        states.forEach((id, s) -> out.add(new IdleCount(at, id, s.start, Duration.ofMillis(s.idleObserved),
                s.warnedAt == null ? Optional.empty() : Optional.of(Duration.ofMillis(s.sinceWarning)))));
        return out;
    }

    /** How a signal step's detail names the signal sent, before it and the closing parenthesis. */
    private static final String SIGNAL_NAMED = ", gpu.idle.signal ";

    /** How a dry run's warning step's detail begins. */
    private static final String DRY_WARN = "dry run: would warn";

    /**
     * Decides after one sweep.
     *
     * @param now       the sweep's time
     * @param live      the allocations live now
     * @param idleSince for each allocation idle at this sweep, since when (all its GPUs measured at or below the
     *                  threshold)
     * @return the steps taken, for the audit
     */
    public List<IdleAction> evaluate(Instant now, List<Allocation> live, Map<String, Instant> idleSince) {
        return evaluate(now, live, idleSince, Set.of());
    }

    /**
     * Decides after one sweep.
     *
     * @param now        the sweep's time
     * @param live       the allocations live now
     * @param idleSince  for each allocation idle at this sweep, since when (all its GPUs measured at or below the
     *                   threshold)
     * @param unmeasured allocations the sweep measured nothing for (the time up to it was a gap): neither idle nor
     *                   busy, their state is kept and nothing is counted
     * @return the steps taken, for the audit
     */
    public List<IdleAction> evaluate(Instant now, List<Allocation> live, Map<String, Instant> idleSince,
            Set<String> unmeasured) {
        List<IdleAction> out = new ArrayList<>(0);
        boolean behind = lastEvaluated != null && now.isBefore(lastEvaluated);
        long observed = observed(now);
        if (behind) {
            // the clock is behind a sweep already judged: the meter measures nothing new until it passes that sweep
            // (its idle starts are the old ones), so nothing is judged, warned or acted on meanwhile; a job busy
            // again in that time is not released on the stale idle start (review33)
            return out;
        }
        if (idleSince.isEmpty() && states.isEmpty()) {
            return out; // nothing idle, nothing flagged: the common case costs nothing more
        }
        Set<String> liveIds = new HashSet<>();
        for (Allocation a : live) {
            liveIds.add(a.id());
            if (!unmeasured.isEmpty() && unmeasured.contains(a.id())) {
                continue; // not measured at this sweep: not busy again, nothing counted (review34)
            }
            Instant since = idleSince.get(a.id());
            State s = states.get(a.id());
            if (since != null && since.isAfter(now)) {
                // idle since a time after this sweep's: the clock stepped back, nothing was measured busy; the state
                // is kept, nothing is audited (review30)
                continue;
            }
            if (since == null) {
                if (s != null) {
                    // audited whether or not it was acted on: a signalled job (action signal, or a release that
                    // failed) outlives the action, and status must not show it for its next stretch (review38)
                    if (s.flagged) {
                        out.add(step(now, a, IdleStep.BUSY_AGAIN, Duration.ZERO, "busy again: left alone"
                                + history(s)));
                        effects.notify(a, IdleStep.BUSY_AGAIN, Duration.ZERO, "GPUs of " + a.id() + " are busy"
                                + " again; the idle policy leaves it alone");
                    }
                    states.remove(a.id());
                }
                continue;
            }
            if (s != null && since.isAfter(s.lastSince)
                    && since.toEpochMilli() - s.lastIdleAt.toEpochMilli() > UsageMeter.MAX_SWEEP_MILLIS) {
                // the meter restarted its idle start after a gap no sweep measured (a suspended host, a jump of the
                // clock that stayed): a new stretch, flagged and warned again before any action (review34), and
                // audited, so status and the console no longer show the old warning (review36)
                if (s.flagged) {
                    out.add(step(now, a, IdleStep.STARTED_OVER, Duration.ZERO, "its idle clock starts over: "
                            + human(Duration.between(s.lastIdleAt, since)) + " no sweep measured (since "
                            + s.lastIdleAt + ")" + history(s)));
                }
                s = null;
            }
            if (s == null) {
                s = new State();
                s.start = since;
                // the first sweep that reads it idle vouches for its own step, not for all the time since the idle
                // start the meter put at the sweep before (review34: a 9m50s step spent act_after)
                s.idleObserved = Math.min(Duration.between(since, now).toMillis(), observed);
                states.put(a.id(), s);
            } else {
                s.idleObserved += observed;
            }
            s.lastSince = since;
            s.lastIdleAt = now;
            Duration wall = Duration.between(s.start, now);
            // idle as the sweeps observed it, never more than the wall clock says: a step ahead under the meter's
            // jump bound does not spend the window, warn_after or act_after at once (review33)
            Duration idle = Duration.ofMillis(Math.min(wall.toMillis(), s.idleObserved));
            String owner = a.owner().orElse(null);
            if (!s.flagged && idle.compareTo(policy.window()) >= 0) {
                s.flagged = true;
                String msg = a.id() + " (" + a.deviceIndices().size() + " GPU" + (a.deviceIndices().size() == 1
                        ? "" : "s") + ", owner " + (owner == null ? "none" : owner) + ") idle for " + human(idle)
                        + " (at or below " + fmt(policy.threshold()) + " % since " + since + ")";
                out.add(step(now, a, IdleStep.FLAGGED, idle, msg));
                effects.notify(a, IdleStep.FLAGGED, idle, msg);
            }
            if (s.acted || policy.action() == IdlePolicy.Action.NONE) {
                continue;
            }
            if (policy.exempt(owner)) {
                if (!s.exemptNoted && idle.compareTo(policy.warnAfter()) >= 0) {
                    s.exemptNoted = true;
                    out.add(step(now, a, IdleStep.SKIPPED, idle, "owner " + owner + " is exempt"
                            + " (gpu.idle.exempt_owners): not warned or acted on"));
                }
                continue;
            }
            if (s.warnedAt == null && idle.compareTo(policy.warnAfter()) >= 0) {
                s.warnedAt = now;
                String msg = warning(a, idle);
                if (policy.dryRun()) {
                    out.add(step(now, a, IdleStep.DRY_RUN, idle, DRY_WARN + ": " + msg));
                } else {
                    effects.notify(a, IdleStep.WARNED, idle, msg);
                    String hook = hook(a, IdleStep.WARNED, idle);
                    out.add(step(now, a, IdleStep.WARNED, idle, msg + hook));
                }
            }
            boolean acts = policy.action() == IdlePolicy.Action.RELEASE
                    || policy.action() == IdlePolicy.Action.SIGNAL;
            if (s.warnedAt != null && s.warnedAt.isBefore(now)) {
                s.sinceWarning += observed;
            }
            // the grace is time sweeps observed after the warning, not the wall clock's: one sweep the clock stepped
            // ahead (or a stalled sampler) cannot spend it at once (review28)
            if (acts && s.warnedAt != null && idle.compareTo(policy.actAfter()) >= 0
                    && s.sinceWarning >= policy.grace().toMillis()) {
                s.acted = true;
                out.add(act(now, a, idle));
            }
        }
        states.keySet().retainAll(liveIds);
        return out;
    }

    /**
     * @return how much of the time since the previous evaluation counts as observed: the step forward, at most the
     *         larger of {@link #MIN_CREDIT_MILLIS} and twice the shortest of the last {@link #RECENT} steps (the first
     *         step: at most twice {@link #MIN_CREDIT_MILLIS}); nothing for the first evaluation, a clock stepped back,
     *         or the step forward right after one
     */
    private long observed(Instant now) {
        Instant previous = lastSweep;
        lastSweep = now;
        if (lastEvaluated == null) {
            if (resumedJudged != null && now.isBefore(resumedJudged)) {
                // the first sweep of a restarted policy is behind the last one its predecessor judged: a step back,
                // as for the policy that ran on (the step forward past it counts nothing: review46)
                lastEvaluated = resumedJudged;
                steppedBack = true;
                return 0;
            }
            lastEvaluated = now;
            return 0;
        }
        long step = now.toEpochMilli() - lastEvaluated.toEpochMilli();
        if (step < 0) {
            // stepped back: nothing observed, and the latest time stays the mark to pass (review33); the first step
            // forward past it counts nothing either: a flapping clock (review30). The sweeps' spacing meanwhile is
            // still their cadence: a policy restarted behind the mark learns it there, and a late sweep past the mark
            // is bounded by it, not by the first sweeps' 60 s (review55)
            if (previous != null && now.isAfter(previous)) {
                remember(now.toEpochMilli() - previous.toEpochMilli());
            }
            steppedBack = true;
            return 0;
        }
        lastEvaluated = now;
        if (steppedBack) {
            steppedBack = false;
            return 0;
        }
        if (step == 0) {
            return 0;
        }
        // the cadence is the shortest recent step, not the last one: steps that double each time (a clock stepped
        // ahead again and again) cannot each open the way for the next (review36)
        long shortest = Long.MAX_VALUE;
        for (long r : recent) {
            if (r > 0) {
                shortest = Math.min(shortest, r);
            }
        }
        long cap = Math.max(MIN_CREDIT_MILLIS, 2 * (shortest == Long.MAX_VALUE ? MIN_CREDIT_MILLIS : shortest));
        remember(step);
        return Math.min(step, cap);
    }

    /** Keeps a step forward between two sweeps among the last {@link #RECENT}: the sweeps' cadence. */
    private void remember(long step) {
        recent[recentAt] = step;
        recentAt = (recentAt + 1) % RECENT;
    }

    /**
     * @return what the policy had done in the stretch that ends, for a {@code BUSY_AGAIN} or {@code STARTED_OVER}
     *         audit: a dry run's warning was never sent (review34, review38)
     */
    private String history(State s) {
        if (s.warnedAt == null) {
            return "";
        }
        if (policy.dryRun()) {
            return " (dry run: a warning would have been sent at " + s.warnedAt + "; none was)";
        }
        return s.acted ? " (it was warned at " + s.warnedAt + " and acted on)"
                : " (it was warned at " + s.warnedAt + "; that warning no longer counts)";
    }

    /** @return how the audit names this policy's action, up to the allocation ("release ", "send SIGTERM ") */
    private String actionText() {
        return policy.action() == IdlePolicy.Action.RELEASE ? "release " : "send SIG" + policy.signal() + " ";
    }

    private IdleAction act(Instant now, Allocation a, Duration idle) {
        boolean release = policy.action() == IdlePolicy.Action.RELEASE;
        String what = actionText() + (release ? "" : "to the job of ") + a.id();
        if (policy.dryRun()) {
            return step(now, a, IdleStep.DRY_RUN, idle, "dry run: would " + what + " (idle " + human(idle) + ")");
        }
        try {
            String done = release ? effects.release(a) : effects.signal(a, policy.signal());
            IdleStep st = release ? IdleStep.RELEASED : IdleStep.SIGNALLED;
            effects.notify(a, st, idle, done);
            return step(now, a, st, idle, done + " (idle " + human(idle) + ", gpu.idle.action "
                    + policy.action().name().toLowerCase(Locale.ROOT) + (release ? "" : SIGNAL_NAMED + policy.signal())
                    + ")" + hook(a, st, idle));
        } catch (RuntimeException e) {
            return step(now, a, IdleStep.FAILED, idle, "could not " + what + ": " + e.getMessage());
        }
    }

    /** @return what a warning says this policy does next */
    private String consequence() {
        return switch (policy.action()) {
            case RELEASE -> "it will be released";
            case SIGNAL -> "its job will get SIG" + policy.signal();
            default -> "nothing more will be done";
        };
    }

    private String warning(Allocation a, Duration idle) {
        String then = consequence();
        Duration left = policy.actAfter().minus(idle);
        Duration wait = left.compareTo(policy.grace()) > 0 ? left : policy.grace();
        return "GPUs " + a.deviceIndices() + " of " + a.id() + " have been idle for " + human(idle) + "; "
                + (policy.action() == IdlePolicy.Action.WARN ? then : then + " in " + human(wait)
                        + " unless they get busy")
                + " (gpu.idle)";
    }

    private String hook(Allocation a, IdleStep step, Duration idle) {
        if (policy.hook().isEmpty()) {
            return "";
        }
        List<String> argv = new ArrayList<>();
        for (String arg : policy.hook()) {
            argv.add(switch (arg) {
                case "{allocation}" -> a.id();
                case "{owner}" -> a.owner().orElse("");
                case "{step}" -> step.name().toLowerCase(Locale.ROOT);
                case "{idle}" -> Long.toString(idle.toSeconds());
                default -> arg;
            });
        }
        try {
            return "; hook: " + effects.runHook(a, argv);
        } catch (RuntimeException e) {
            return "; hook failed: " + e.getMessage();
        }
    }

    private static IdleAction step(Instant now, Allocation a, IdleStep st, Duration idle, String detail) {
        String d = detail.length() > RecordCodec.MAX_TEXT ? detail.substring(0, RecordCodec.MAX_TEXT - 3) + "..."
                : detail;
        return new IdleAction(now, a.id(), a.owner(), st, idle, d);
    }

    static String human(Duration d) {
        long m = d.toMinutes();
        if (m < 1) {
            return d.toSeconds() + " s";
        }
        return m < 120 ? m + " min" : String.format(Locale.ROOT, "%.1f h", d.toMinutes() / 60.0);
    }

    private static String fmt(double v) {
        return v == Math.rint(v) ? Long.toString((long) v) : Double.toString(v);
    }

    /** @return the state of one allocation, for status views: flagged, warned at */
    public Optional<Instant> warnedAt(String id) {
        State s = states.get(id);
        return s == null ? Optional.empty() : Optional.ofNullable(s.warnedAt);
    }
}
