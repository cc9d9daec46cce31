package io.gpusched.accounting;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingRecord.IdleCount;
import io.gpusched.accounting.AccountingRecord.Interval;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;

/**
 * Which allocations the node's sampler last recorded as idle, and the idle policy's last step on each, read from the
 * store without a lock (for {@code gpusched status}, which may run as any user).
 *
 * @param idleSince when the allocation's GPUs went idle (as of its last checkpoint)
 * @param asOf      the end of its last interval (the last checkpoint)
 * @param lastStep  the idle policy's last step on it, if any
 * @param idleFor   how long it had been idle at its last checkpoint: the time samplers ran since {@code idleSince}
 *                  (a restart's downtime within the stretch left out: review41)
 */
public record IdleStatus(Instant idleSince, Instant asOf, Optional<IdleStep> lastStep, Duration idleFor) {

    /** @return e.g. "idle 42 min (warned)" */
    public String describe() {
        return "idle " + IdleWatch.human(idleFor())
                + lastStep.filter(s -> s != IdleStep.BUSY_AGAIN && s != IdleStep.STARTED_OVER)
                        .map(s -> " (" + s.name().toLowerCase(Locale.ROOT).replace('_', ' ') + ")").orElse("");
    }

    /**
     * @param store the node's store
     * @param now   today (the last two days are read for the allocations' intervals; the policy's steps are read
     *              back to the day the oldest idle stretch began)
     * @return per allocation idle at its last checkpoint (pods' and Slurm jobs' tracks are no allocations: not listed),
     *         its state; the policy's last step is shown only when it
     *         belongs to that idle stretch (taken at or after its start: a warning before a busy spell or a gap the
     *         policy starts over after is not this stretch's; review38)
     */
    public static Map<String, IdleStatus> read(AccountingStore store, Instant now) {
        Map<String, IdleStatus> out = new HashMap<>();
        stretches(store, now).forEach((id, st) -> {
            if (ExternalHolders.isExternal(id)) {
                return; // a pod's or Slurm job's track: no allocation, never the policy's (review60)
            }
            if (st.tail().isAfter(st.asOf())) {
                return; // its last record is a gap: listed again from the next checkpoint that measures it
            }
            out.put(id, new IdleStatus(st.start(), st.asOf(),
                    st.steps().isEmpty() ? Optional.empty()
                            : Optional.of(st.steps().get(st.steps().size() - 1).action()),
                    Duration.ofMillis(st.sampledSince(st.start()))));
        });
        return out;
    }

    /**
     * An allocation's idle stretch as the store has it: where it began (continued back across a gap of at most
     * {@link UsageMeter#MAX_SWEEP_MILLIS} that follows an interval idle at its end, as the policy continues it: a
     * sampler restarted within that time, a clock jump that came back), the end of its last interval idle at its end
     * ({@code asOf}), the policy's steps taken in it, oldest first, and the end of the allocation's last record
     * ({@code tail}: later than {@code asOf} where gap records follow it, a sampler restarted and stopped again before
     * it measured the allocation), and the policy's latest count of the stretch (null where there is none: a store
     * written before counts were, or a stretch the policy started elsewhere).
     */
    record Stretch(Instant start, Instant asOf, Instant lastSince, List<IdleAction> steps, List<Interval> gaps,
            List<Interval> sampled, Instant tail, IdleCount count) {
        /**
         * @return the stretch's time from {@code from} as the running policy could have counted it: each checkpoint
         *         interval ({@link #sampled}, oldest first) at most 30 s more than the longer of a minute and the
         *         shortest of the 8 before it, as the policy counts a late sweep at most 30 s or twice its cadence
         *         (review41: a late sweep before a restart was counted in full)
         */
        long countedSince(Instant from) {
            long[] recent = new long[IdleWatch.RECENT];
            int n = 0;
            long total = 0;
            for (Interval iv : sampled) {
                long len = iv.to().toEpochMilli() - iv.from().toEpochMilli();
                long shortest = Long.MAX_VALUE;
                for (int i = 0; i < Math.min(n, recent.length); i++) {
                    shortest = Math.min(shortest, recent[i]);
                }
                long cap = Math.max(2 * IdleWatch.MIN_CREDIT_MILLIS, shortest == Long.MAX_VALUE ? 0 : shortest)
                        + IdleWatch.MIN_CREDIT_MILLIS;
                long part = iv.to().toEpochMilli() - Math.max(iv.from().toEpochMilli(), from.toEpochMilli());
                if (part > 0) {
                    total += Math.min(part, cap);
                }
                recent[n++ % recent.length] = len;
            }
            return total;
        }

        /** @return the stretch's time from {@code from} to {@link #asOf}, less its gaps' time after {@code from} */
        long sampledSince(Instant from) {
            long ms = Math.max(0, asOf.toEpochMilli() - from.toEpochMilli());
            for (Interval g : gaps) {
                long a = Math.max(g.from().toEpochMilli(), from.toEpochMilli());
                long b = Math.min(g.to().toEpochMilli(), asOf.toEpochMilli());
                ms -= Math.max(0, b - a);
            }
            return Math.max(0, ms);
        }
    }

    /** @return per allocation idle at its last interval in the last two days, its stretch */
    static Map<String, Stretch> stretches(AccountingStore store, Instant now) {
        LocalDate today = AccountingStore.dayOf(now);
        Map<String, List<Interval>> intervals = new HashMap<>();
        Map<String, List<IdleAction>> steps = new HashMap<>();
        Map<String, List<IdleCount>> counts = new HashMap<>();
        List<String> warnings = new ArrayList<>();
        List<LocalDate> recent = new ArrayList<>();
        for (LocalDate d : store.days()) {
            // yesterday, today, and any later day: a clock stepped back across midnight while the sampler was down
            // must still find the stretch's last checkpoint, written in the later day (review42)
            if (!d.isBefore(today.minusDays(1))) {
                recent.add(d);
            }
        }
        for (LocalDate d : recent) {
            store.readDay(d, r -> {
                if (r instanceof Interval iv) {
                    intervals.computeIfAbsent(iv.allocationId(), k -> new ArrayList<>()).add(iv);
                } else if (r instanceof IdleAction a) {
                    steps.computeIfAbsent(a.allocationId(), k -> new ArrayList<>()).add(a);
                } else if (r instanceof IdleCount c) {
                    counts.computeIfAbsent(c.allocationId(), k -> new ArrayList<>()).add(c);
                }
            }, warnings);
        }
        // id -> {stretch start, as of (the last interval idle at its end), its idle start, the last record's end}
        Map<String, Instant[]> idle = new HashMap<>();
        Map<String, List<Interval>> gapsOf = new HashMap<>();
        LocalDate earliest = today.minusDays(1);
        for (Map.Entry<String, List<Interval>> e : intervals.entrySet()) {
            Interval last = null;
            for (Interval iv : e.getValue()) {
                // the later record wins; at the same time, the one that ends the allocation (a release on a
                // checkpoint sweep writes its end before the sweep's checkpoint of it: review38)
                if (last == null || iv.to().isAfter(last.to()) || iv.to().equals(last.to()) && iv.end().isPresent()) {
                    last = iv;
                }
            }
            if (last.end().isPresent()) {
                continue;
            }
            Instant tail = last.to();
            if (last.idleSince().isEmpty()) {
                // gaps at the tail after an interval idle at its end: a sampler restarted (its first sweep closed the
                // gap, measuring nothing) and stopped again; the stretch stands as of that interval, and the policy
                // resumed from it decides whether the gap ended it, as a running one does
                last = last.gap() ? beforeGaps(e.getValue(), last.to(), new ArrayList<>()) : null;
                if (last == null) {
                    continue;
                }
            }
            List<Interval> gaps = new ArrayList<>();
            Instant start = continued(e.getValue(), last.idleSince().get(), gaps);
            gapsOf.put(e.getKey(), gaps);
            idle.put(e.getKey(), new Instant[]{start, last.to(), last.idleSince().get(), tail});
            LocalDate began = AccountingStore.dayOf(start);
            if (began.isBefore(earliest)) {
                earliest = began;
            }
        }
        if (earliest.isBefore(today.minusDays(1))) {
            // a stretch that began before yesterday: its warning may be in an older day (review38: "(warned)" was
            // lost from the third day of a warned allocation's idleness)
            for (LocalDate d : store.days()) {
                if (!d.isBefore(earliest) && d.isBefore(today.minusDays(1))) {
                    store.readDay(d, r -> {
                        if (r instanceof IdleAction a && idle.containsKey(a.allocationId())) {
                            steps.computeIfAbsent(a.allocationId(), k -> new ArrayList<>()).add(a);
                        }
                    }, warnings);
                }
            }
        }
        Map<String, Stretch> out = new HashMap<>();
        idle.forEach((id, t) -> {
            List<IdleAction> in = new ArrayList<>();
            for (IdleAction a : steps.getOrDefault(id, List.of())) {
                if (!a.at().isBefore(t[0])) {
                    in.add(a);
                }
            }
            in.sort(Comparator.comparing(IdleAction::at));
            Instant start = t[0];
            for (IdleAction a : in) {
                if (a.action() == IdleStep.BUSY_AGAIN) {
                    start = a.at(); // busy then: the stretch began after it (review41: a busy spell a crash left
                    // without a checkpoint was counted idle)
                }
            }
            if (start.isAfter(t[1])) {
                return; // busy again after its last interval: not idle as far as the store knows
            }
            Instant from = start;
            in.removeIf(a -> a.at().isBefore(from));
            List<Interval> sampled = new ArrayList<>();
            for (Interval iv : intervals.get(id)) {
                if (!iv.gap() && iv.to().isAfter(start) && !iv.to().isAfter(t[1]) && iv.to().isAfter(iv.from())) {
                    sampled.add(iv);
                }
            }
            sampled.sort(Comparator.comparing(Interval::from));
            // the policy's latest count of this stretch (one that counts from its start): what the policy had counted
            // at that time; the intervals after it are counted by the bound (review43: a crash after a midnight cut
            // found none at or after the stretch's last interval, and re-derived it all)
            IdleCount count = null;
            for (IdleCount c : counts.getOrDefault(id, List.of())) {
                if (c.start().equals(start) && (count == null || c.at().isAfter(count.at()))) {
                    count = c;
                }
            }
            // gaps at the tail: the stretch stands as of the interval before them (a sweep that closed them reading the
            // allocation busy wrote a record that says so, and beforeGaps stops there: reviews 44, 48); review43 had
            // the stretch stand only when the policy's latest count was at or after the tail, which dropped it without
            // a word after a jump the clock took back (a gap written at once, the count at the checkpoint before it:
            // the next sampler warned again, review48)
            out.put(id, new Stretch(start, t[1], t[2].isBefore(start) ? start : t[2], List.copyOf(in),
                    List.copyOf(gapsOf.get(id)), List.copyOf(sampled), t[3], count));
        });
        return out;
    }

    /**
     * @return where the stretch idle since {@code since} began: {@code since}, or, where a gap record ends at
     *         {@code since} and the interval before the gap was idle at its end no more than
     *         {@link UsageMeter#MAX_SWEEP_MILLIS} before it, that interval's stretch (the policy keeps its state across
     *         such a gap)
     */
    private static Instant continued(List<Interval> ivs, Instant since, List<Interval> gaps) {
        Instant start = since;
        for (int hops = 0; hops < ivs.size(); hops++) {
            List<Interval> these = new ArrayList<>();
            Interval before = beforeGaps(ivs, start, these);
            if (before == null || start.toEpochMilli() - before.to().toEpochMilli() > UsageMeter.MAX_SWEEP_MILLIS
                    || !before.idleSince().get().isBefore(start)) {
                return start;
            }
            gaps.addAll(these);
            start = before.idleSince().get();
        }
        return start;
    }

    /**
     * @param gaps collects the gap records walked back over
     * @return the interval idle at its end (not ending the allocation) that the contiguous gap records ending at
     *         {@code at} follow; null when no gap record ends at {@code at} or none such precedes them
     */
    /**
     * @return whether a record that is no gap, ends no allocation and has no idle start ends at {@code t}: a sweep read
     *         the allocation busy then (a restarted sampler's first sweep writes one: review44)
     */
    private static boolean busyAt(List<Interval> ivs, Instant t) {
        for (Interval iv : ivs) {
            if (!iv.gap() && iv.to().equals(t) && iv.idleSince().isEmpty() && iv.end().isEmpty()) {
                return true;
            }
        }
        return false;
    }

    private static Interval beforeGaps(List<Interval> ivs, Instant at, List<Interval> gaps) {
        Instant from = at;
        boolean moved = true;
        while (moved) { // back along contiguous gap records, up to a junction where a sweep read the allocation busy
            moved = false;
            if (busyAt(ivs, from)) {
                return null;
            }
            for (Interval iv : ivs) {
                if (iv.gap() && iv.to().equals(from) && iv.from().isBefore(from)) {
                    gaps.add(iv);
                    from = iv.from();
                    moved = true;
                    break;
                }
            }
        }
        if (from.equals(at)) {
            return null;
        }
        Interval before = null;
        for (Interval iv : ivs) {
            if (!iv.gap() && iv.to().equals(from) && iv.end().isEmpty() && iv.idleSince().isPresent()) {
                before = iv;
            }
        }
        return before;
    }
}
