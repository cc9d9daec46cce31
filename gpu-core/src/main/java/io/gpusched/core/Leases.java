package io.gpusched.core;

import java.time.Instant;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * Leases: which allocations have run past their {@code expiresAt} (each reported once per process), and the rule for
 * when a lease ends its allocation ({@link #ends}).
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

    /**
     * The one rule for when a lease ends its allocation, shared by the scheduler's transactions and the lock-free
     * {@link NodeLedgerView}: its lease has run out at {@code now}, and either the process that made it had
     * {@code gpu.leases.release_on_expiry} (the ledger records it) or the deciding process has it. Otherwise an expired
     * lease is held, marked expired, until released or renewed.
     *
     * @param releaseOnExpiry the deciding process's {@code gpu.leases.release_on_expiry}
     */
    static boolean ends(Allocation a, NodeState state, boolean releaseOnExpiry, Instant now) {
        return a.expiresAt().isPresent() && !a.expiresAt().get().isAfter(now)
                && (releaseOnExpiry || state.releasesOnExpiry(a.id()));
    }

    /** @return whether the allocation's lease has run out at {@code now} */
    static boolean expired(Allocation a, Instant now) {
        return a.expiresAt().isPresent() && !a.expiresAt().get().isAfter(now);
    }
}
