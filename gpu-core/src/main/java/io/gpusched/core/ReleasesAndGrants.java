package io.gpusched.core;

import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * What {@link GpuScheduler#releaseEachThenAllocateInOrder} did in its one transaction: each release's outcome, in the
 * order given, and the grants of the requests that fit, in order, with the refusal that stopped them.
 *
 * @param releases the outcome of each release, in the order the ids were given
 * @param grants   the allocations of the granted requests: a prefix of the requests (possibly empty)
 * @param refusal  why the request after the last grant was not allocated; empty when every request was granted
 */
public record ReleasesAndGrants(List<Release> releases, List<Allocation> grants, Optional<RuntimeException> refusal) {

    /** Copies the lists. */
    public ReleasesAndGrants {
        releases = List.copyOf(releases);
        grants = List.copyOf(grants);
        Objects.requireNonNull(refusal, "refusal");
    }

    /**
     * One release's outcome.
     *
     * @param id       the allocation id
     * @param released true when it was live and is now released; false when it was released before (or refused)
     * @param refused  why it was not released (an id the node never issued, a job still running in it); empty when it
     *                 was released or had been before
     */
    public record Release(String id, boolean released, Optional<RuntimeException> refused) {
        /** Checks the fields. */
        public Release {
            Objects.requireNonNull(id, "id");
            Objects.requireNonNull(refused, "refused");
        }
    }
}
