package io.gpusched.core;

import io.gpusched.core.LedgerRecord.Cause;
import io.gpusched.core.LedgerRecord.Released;
import java.time.Clock;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.function.Function;

/**
 * Leases: which allocations have run past their {@code expiresAt} (each reported once per process), and the change
 * that releases them when {@code gpu.leases.release_on_expiry} is set.
 */
final class Leases {
    private final Set<String> reported = new HashSet<>();

    /** @return allocations expired at {@code now} that this process has not reported yet */
    synchronized List<Allocation> newlyExpired(Collection<Allocation> live, Instant now) {
        List<Allocation> out = new ArrayList<>();
        Set<String> ids = new HashSet<>();
        for (Allocation a : live) {
            ids.add(a.id());
            if (a.expiresAt().isPresent() && !a.expiresAt().get().isAfter(now) && reported.add(a.id())) {
                out.add(a);
            }
        }
        reported.retainAll(ids);
        return out;
    }

    /** A renewed lease may expire (and be reported) again. */
    synchronized void renewed(String id) {
        reported.remove(id);
    }

    /** @return the change releasing every allocation whose lease has ended at {@code now}, as decided on the ledger */
    static Ledger.Change<Integer> releaseExpired(Instant now, Function<Allocation, List<String>> drainOf) {
        return (state, seq) -> {
            List<LedgerRecord> out = new ArrayList<>();
            for (Allocation a : state.live.values()) {
                if (a.expiresAt().isPresent() && !a.expiresAt().get().isAfter(now)) {
                    out.add(new Released(a.id(), Cause.EXPIRED, now, drainOf.apply(a), Optional.empty()));
                }
            }
            return new Ledger.Decision<>(out, out.size());
        };
    }

    /** @return the change reclaiming every allocation whose holder process is gone */
    static Ledger.Change<Void> reclaimDeadHolders(Clock clock, Function<Allocation, List<String>> drainOf) {
        return (state, seq) -> {
            List<LedgerRecord> out = new ArrayList<>();
            Instant now = null;
            for (Allocation a : state.live.values()) {
                Optional<HolderProcess> h = a.request().holder();
                if (h.isPresent() && !h.get().isAlive()) {
                    now = now == null ? clock.instant() : now;
                    out.add(new Released(a.id(), Cause.RECLAIMED, now, drainOf.apply(a), h));
                }
            }
            return new Ledger.Decision<>(out, null);
        };
    }
}
