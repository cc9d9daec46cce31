package io.gpusched.accounting;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingRecord.Interval;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDate;
import java.util.ArrayList;
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
 */
public record IdleStatus(Instant idleSince, Instant asOf, Optional<IdleStep> lastStep) {

    /** @return how long it had been idle at its last checkpoint */
    public Duration idleFor() {
        return Duration.between(idleSince, asOf);
    }

    /** @return e.g. "idle 42 min (warned)" */
    public String describe() {
        return "idle " + IdleWatch.human(idleFor())
                + lastStep.filter(s -> s != IdleStep.BUSY_AGAIN && s != IdleStep.STARTED_OVER)
                        .map(s -> " (" + s.name().toLowerCase(Locale.ROOT).replace('_', ' ') + ")").orElse("");
    }

    /**
     * @param store the node's store
     * @param now   today (the last two days are read for the allocations' last intervals; the policy's steps are read
     *              back to the day the oldest idle stretch began)
     * @return per allocation idle at its last checkpoint, its state; the policy's last step is shown only when it
     *         belongs to that idle stretch (taken at or after its start: a warning before a gap, a restart of the
     *         sampler or a busy spell is not this stretch's; review38)
     */
    public static Map<String, IdleStatus> read(AccountingStore store, Instant now) {
        LocalDate today = AccountingStore.dayOf(now);
        Map<String, Interval> last = new HashMap<>();
        Map<String, IdleAction> steps = new HashMap<>();
        List<String> warnings = new ArrayList<>();
        for (LocalDate d : List.of(today.minusDays(1), today)) {
            store.readDay(d, r -> {
                if (r instanceof Interval iv) {
                    // the later record wins; at the same time, the one that ends the allocation (a release on a
                    // checkpoint sweep writes its end before the sweep's checkpoint of it: review38)
                    last.merge(iv.allocationId(), iv, (a, b) -> b.to().isBefore(a.to())
                            || b.to().equals(a.to()) && a.end().isPresent() ? a : b);
                } else if (r instanceof IdleAction a) {
                    steps.merge(a.allocationId(), a, IdleStatus::later);
                }
            }, warnings);
        }
        Map<String, Interval> idle = new HashMap<>();
        LocalDate earliest = today.minusDays(1);
        for (Map.Entry<String, Interval> e : last.entrySet()) {
            Interval iv = e.getValue();
            if (iv.end().isEmpty() && iv.idleSince().isPresent()) {
                idle.put(e.getKey(), iv);
                LocalDate began = AccountingStore.dayOf(iv.idleSince().get());
                if (began.isBefore(earliest)) {
                    earliest = began;
                }
            }
        }
        if (earliest.isBefore(today.minusDays(1))) {
            // a stretch that began before yesterday: its warning may be in an older day (review38: "(warned)" was
            // lost from the third day of a warned allocation's idleness)
            LocalDate from = earliest;
            Map<String, IdleAction> older = new HashMap<>();
            for (LocalDate d : store.days()) {
                if (!d.isBefore(from) && d.isBefore(today.minusDays(1))) {
                    store.readDay(d, r -> {
                        if (r instanceof IdleAction a && idle.containsKey(a.allocationId())) {
                            older.merge(a.allocationId(), a, IdleStatus::later);
                        }
                    }, warnings);
                }
            }
            older.forEach((id, a) -> steps.merge(id, a, IdleStatus::later));
        }
        Map<String, IdleStatus> out = new HashMap<>();
        idle.forEach((id, iv) -> {
            Instant since = iv.idleSince().get();
            out.put(id, new IdleStatus(since, iv.to(), Optional.ofNullable(steps.get(id))
                    .filter(a -> !a.at().isBefore(since)).map(IdleAction::action)));
        });
        return out;
    }

    private static IdleAction later(IdleAction x, IdleAction y) {
        return y.at().isBefore(x.at()) ? x : y;
    }
}
