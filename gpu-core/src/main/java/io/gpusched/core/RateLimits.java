package io.gpusched.core;

import io.gpusched.core.GpuAllocationException.Reason;
import java.time.Duration;
import java.time.Instant;
import java.util.HashMap;
import java.util.Map;

/**
 * Per-owner rate limits ({@code gpu.rate_limit}) for one process. A request is refused with {@code RATE_LIMITED} when
 * its owner has no token; a token is spent only when an allocation is granted, so refusals (for any reason) cost the
 * owner nothing. Called inside the scheduler's transactions, which serialize it.
 */
final class RateLimits {
    private final double perSecond;
    private final int burst;
    private final Map<String, TokenBucket> buckets = new HashMap<>();

    RateLimits(GpuConfig config) {
        this.perSecond = config.rateLimitPerSecond();
        this.burst = config.rateLimitBurst();
    }

    /** @throws GpuAllocationException with {@code RATE_LIMITED} if the owner has no token now */
    void check(GpuRequest request, Instant now) {
        if (perSecond <= 0) {
            return;
        }
        String owner = request.owner().orElse("(anonymous)");
        Duration wait = bucket(owner, now).available(now);
        if (!wait.isZero()) {
            throw new GpuAllocationException(Reason.RATE_LIMITED, "owner " + owner + " is over its rate limit of "
                    + perSecond + " allocations/s (burst " + burst + "); retry in " + Math.max(1, wait.toMillis())
                    + " ms");
        }
    }

    /** Spends the owner's token for a granted allocation. @return true if a token was spent (limits are on) */
    boolean spend(GpuRequest request, Instant now) {
        if (perSecond > 0) {
            bucket(request.owner().orElse("(anonymous)"), now).take(now);
            return true;
        }
        return false;
    }

    /** Gives back the token {@link #spend} took for an allocation that was not made after all (its write failed). */
    void refund(GpuRequest request) {
        TokenBucket b = buckets.get(request.owner().orElse("(anonymous)"));
        if (b != null) {
            b.refund();
        }
    }

    private TokenBucket bucket(String owner, Instant now) {
        return buckets.computeIfAbsent(owner, o -> new TokenBucket(perSecond, burst, now));
    }
}
