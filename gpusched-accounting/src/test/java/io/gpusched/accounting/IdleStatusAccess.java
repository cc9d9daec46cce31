package io.gpusched.accounting;

import io.gpusched.core.Allocation;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;

/** Package access for tests in other packages: a policy resumed from the store, as a restarted sampler resumes it. */
public final class IdleStatusAccess {
    private IdleStatusAccess() {
    }

    /**
     * @return when the policy {@code p}, resumed from the store's stretch of allocation {@code id} as of {@code now},
     *         holds the allocation warned; empty when it does not (or the store has no idle stretch of it)
     */
    public static Optional<Instant> warnedAfterResume(IdlePolicy p, AccountingStore store, Instant now, String id) {
        IdleStatus.Stretch st = IdleStatus.stretches(store, now).get(id);
        if (st == null) {
            return Optional.empty();
        }
        IdleWatch w = new IdleWatch(p, new IdleEffects() {
            @Override
            public void notify(Allocation allocation, IdleStep step, Duration idleFor, String message) {
            }

            @Override
            public String release(Allocation allocation) {
                throw new UnsupportedOperationException();
            }

            @Override
            public String signal(Allocation allocation, String signal) {
                throw new UnsupportedOperationException();
            }

            @Override
            public String runHook(Allocation allocation, List<String> argv) {
                throw new UnsupportedOperationException();
            }
        });
        w.resume(id, st);
        return w.warnedAt(id);
    }
}
