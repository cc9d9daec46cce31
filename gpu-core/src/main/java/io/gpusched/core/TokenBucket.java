package io.gpusched.core;

import java.time.Duration;
import java.time.Instant;

/** A token bucket on the scheduler's clock: {@code rate} tokens per second, at most {@code burst}. Not thread-safe. */
final class TokenBucket {
    private final double rate;
    private final double burst;
    private double tokens;
    private Instant last;

    TokenBucket(double rate, int burst, Instant now) {
        this.rate = rate;
        this.burst = burst;
        this.tokens = burst;
        this.last = now;
    }

    private void refill(Instant now) {
        double elapsed = Math.max(0, Duration.between(last, now).toNanos() / 1e9);
        tokens = Math.min(burst, tokens + elapsed * rate);
        if (now.isAfter(last)) {
            last = now;
        }
    }

    /** @return zero if a token is available now (nothing is taken), else how long until one is */
    Duration available(Instant now) {
        refill(now);
        if (tokens >= 1) {
            return Duration.ZERO;
        }
        return Duration.ofNanos((long) Math.ceil((1 - tokens) / rate * 1e9));
    }

    /** Gives back one token taken by {@link #take} (at most {@code burst}). */
    void refund() {
        tokens = Math.min(burst, tokens + 1);
    }

    /** Takes a token (call after {@link #available} said one is there). */
    void take(Instant now) {
        refill(now);
        tokens = Math.max(0, tokens - 1);
    }
}
