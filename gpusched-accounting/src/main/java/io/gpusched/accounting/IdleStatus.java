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
     * @param now   today (the last two days are read)
     * @return per allocation idle at its last checkpoint, its state
     */
    public static Map<String, IdleStatus> read(AccountingStore store, Instant now) {
        LocalDate today = AccountingStore.dayOf(now);
        Map<String, Interval> last = new HashMap<>();
        Map<String, IdleAction> steps = new HashMap<>();
        List<String> warnings = new ArrayList<>();
        for (LocalDate d : List.of(today.minusDays(1), today)) {
            store.readDay(d, r -> {
                if (r instanceof Interval iv) {
                    last.merge(iv.allocationId(), iv, (a, b) -> b.to().isBefore(a.to()) ? a : b);
                } else if (r instanceof IdleAction a) {
                    steps.merge(a.allocationId(), a, (x, y) -> y.at().isBefore(x.at()) ? x : y);
                }
            }, warnings);
        }
        Map<String, IdleStatus> out = new HashMap<>();
        last.forEach((id, iv) -> {
            if (iv.end().isEmpty() && iv.idleSince().isPresent()) {
                out.put(id, new IdleStatus(iv.idleSince().get(), iv.to(),
                        Optional.ofNullable(steps.get(id)).map(IdleAction::action)));
            }
        });
        return out;
    }
}
