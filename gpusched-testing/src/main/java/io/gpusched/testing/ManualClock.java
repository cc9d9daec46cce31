package io.gpusched.testing;

import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZoneOffset;

/**
 * A clock tests move by hand, shared by every module's tests (the gpusched-testing module): it starts at
 * {@link #DEFAULT_START} or where told, and moves only when {@link #advance}, {@link #set} or {@link #setMillis} is
 * called. Safe to read from other threads.
 */
public final class ManualClock extends Clock {
    /** Where a clock built without a start begins. */
    public static final Instant DEFAULT_START = Instant.parse("2026-01-01T00:00:00Z");

    private volatile Instant now;

    /** A clock at {@link #DEFAULT_START}. */
    public ManualClock() {
        this(DEFAULT_START);
    }

    /** @param start where the clock begins */
    public ManualClock(Instant start) {
        this.now = start;
    }

    /** Moves the clock by {@code d} (negative moves it back). */
    public void advance(Duration d) {
        now = now.plus(d);
    }

    /** Sets the clock to {@code t}. */
    public void set(Instant t) {
        now = t;
    }

    /** Sets the clock to {@code epochMillis}. */
    public void setMillis(long epochMillis) {
        now = Instant.ofEpochMilli(epochMillis);
    }

    @Override
    public ZoneId getZone() {
        return ZoneOffset.UTC;
    }

    @Override
    public Clock withZone(ZoneId zone) {
        return this;
    }

    @Override
    public Instant instant() {
        return now;
    }
}
