package io.gpusched.server;

import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The console's per-GPU sample history: for each GPU a fixed-size ring of primitive columns (time, utilization, memory
 * used, temperature, power) holding the last {@code window} at the sampling interval. Memory is fixed at construction
 * ({@code capacity} points per GPU, whatever the uptime, and never more than {@link #MAX_POINTS}); a point older than
 * the window (by the injected clock) is not served even when the ring still holds it, so a paused sampler never shows
 * stale minutes as recent.
 *
 * <p>Sampling faster than {@code window / (MAX_POINTS - 1)} (100 ms for the console's ten minutes) does not grow the
 * ring: the history then keeps one slot per {@link #stride()}, holding the latest sample taken in it (so
 * {@code --interval 1ms} keeps 6,001 points per GPU, about 240 KB, not 600,001).
 *
 * <p>Served points are oldest first and never stamped after "now": after the clock steps back, points stamped in the
 * (new) future are held back until the clock reaches them again.
 */
final class SampleHistory {
    /** One sampled point of one GPU; null fields were not reported. */
    record Point(long t, Double util, Long memUsed, Double temp, Double power) {
    }

    /** Most points one GPU's ring holds: ten minutes at 100 ms, both ends included. */
    static final int MAX_POINTS = 6_001;

    private final Clock clock;
    private final Duration window;
    private final int capacity;
    /** ms: samples closer than this to the start of the newest slot replace it (0: every sample gets a slot) */
    private final long stride;
    private final Map<Integer, Ring> rings = new TreeMap<>();

    /**
     * @param clock    gives "now" for the window cut
     * @param window   how far back points are kept and served (the console uses ten minutes)
     * @param interval the sampling interval; the ring holds window / interval points (+ 1), at least 2
     */
    SampleHistory(Clock clock, Duration window, Duration interval) {
        this.clock = Objects.requireNonNull(clock, "clock");
        this.window = Objects.requireNonNull(window, "window");
        long per = Math.max(1, interval.toMillis());
        long wanted = Math.max(2, window.toMillis() / per + 1);
        if (wanted > MAX_POINTS) {
            this.capacity = MAX_POINTS;
            this.stride = -Math.floorDiv(-window.toMillis(), MAX_POINTS - 1); // ceil: capacity slots cover the window
        } else {
            this.capacity = (int) wanted;
            this.stride = 0;
        }
    }

    /** @return ms of one slot when sampling is faster than the ring can hold (0 when every sample gets a slot) */
    long stride() {
        return stride;
    }

    /** @return points each GPU's ring holds at most */
    int capacity() {
        return capacity;
    }

    /** @return the window served by default */
    Duration window() {
        return window;
    }

    /** Appends one point for one GPU, overwriting its oldest when the ring is full. */
    synchronized void add(int gpu, Point p) {
        rings.computeIfAbsent(gpu, g -> new Ring(capacity)).add(p, stride);
    }

    /**
     * @param gpu    one GPU index, or empty for all
     * @param window how far back from now (at most the history's window)
     * @return each GPU's points within the window, oldest first
     */
    synchronized Map<Integer, List<Point>> points(Optional<Integer> gpu, Duration window) {
        Duration w = window.compareTo(this.window) > 0 ? this.window : window;
        long now = clock.millis();
        long from = now - w.toMillis();
        Map<Integer, List<Point>> out = new LinkedHashMap<>();
        rings.forEach((i, r) -> {
            if (gpu.isEmpty() || gpu.get().equals(i)) {
                out.put(i, r.between(from, now));
            }
        });
        return out;
    }

    /** ISO-8601 durations of days, hours, minutes and seconds, ASCII digits only, no sign. */
    private static final Pattern ISO = Pattern.compile(
            "[Pp](?:[0-9]+[Dd])?(?:[Tt](?:[0-9]+[Hh])?(?:[0-9]+[Mm])?(?:[0-9]+(?:\\.[0-9]+)?[Ss])?)?");
    private static final Pattern SHORT = Pattern.compile("([0-9]+)(ms|s|m|h)");

    /**
     * Parses a window such as {@code 10m}, {@code 90s}, {@code 1h}, {@code 500ms} or ISO-8601 {@code PT10M}. The
     * grammar is ASCII: digits 0-9 only (no other Unicode digits), no sign, nothing trimmed (a space or a control
     * character around the value is an error).
     */
    static Duration parseWindow(String s) {
        try {
            if (ISO.matcher(s).matches()) {
                return positive(s, Duration.parse(s));
            }
            Matcher m = SHORT.matcher(s);
            if (m.matches()) {
                long n = Long.parseLong(m.group(1));
                switch (m.group(2)) {
                    case "ms":
                        return positive(s, Duration.ofMillis(n));
                    case "s":
                        return positive(s, Duration.ofSeconds(n));
                    case "m":
                        return positive(s, Duration.ofMinutes(n));
                    default:
                        return positive(s, Duration.ofHours(n));
                }
            }
        } catch (RuntimeException e) {
            // fall through to the message below
        }
        throw new IllegalArgumentException("window=" + printable(s) + " is not a duration; use ASCII digits and a"
                + " unit, e.g. 10m, 90s, 1h, 500ms, or ISO-8601 PT10M");
    }

    /** @return s with control and non-ASCII characters as \\uXXXX, so an error message shows what was sent */
    static String printable(String s) {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < s.length() && i < 64; i++) {
            char c = s.charAt(i);
            if (c < 0x20 || c > 0x7e) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return s.length() > 64 ? b + "..." : b.toString();
    }

    private static Duration positive(String s, Duration d) {
        if (d.isNegative() || d.isZero()) {
            throw new IllegalArgumentException("window=" + printable(s) + " must be positive");
        }
        return d;
    }

    /** Fixed-size ring of primitive columns; NaN / -1 stand for "not reported". */
    private static final class Ring {
        private final long[] t;
        private final double[] util;
        private final long[] mem;
        private final double[] temp;
        private final double[] power;
        private int next;
        private int size;
        /** time of the first sample in the newest slot */
        private long anchor;

        Ring(int capacity) {
            t = new long[capacity];
            util = new double[capacity];
            mem = new long[capacity];
            temp = new double[capacity];
            power = new double[capacity];
        }

        void add(Point p, long stride) {
            if (stride > 0 && size > 0 && p.t() >= anchor && p.t() - anchor < stride) {
                // sampling faster than the ring holds: the newest slot keeps the latest sample taken in it
                int last = (next - 1 + t.length) % t.length;
                put(last, p);
                return;
            }
            anchor = p.t();
            put(next, p);
            next = (next + 1) % t.length;
            size = Math.min(size + 1, t.length);
        }

        private void put(int i, Point p) {
            t[i] = p.t();
            util[i] = p.util() == null ? Double.NaN : p.util();
            mem[i] = p.memUsed() == null ? -1 : p.memUsed();
            temp[i] = p.temp() == null ? Double.NaN : p.temp();
            power[i] = p.power() == null ? Double.NaN : p.power();
        }

        /** @return the points stamped within [from, to], oldest first (by time, not by when they were added) */
        List<Point> between(long from, long to) {
            List<Point> out = new ArrayList<>(size);
            int start = (next - size + t.length) % t.length;
            boolean sorted = true;
            long prev = Long.MIN_VALUE;
            for (int k = 0; k < size; k++) {
                int i = (start + k) % t.length;
                if (t[i] >= from && t[i] <= to) {
                    out.add(new Point(t[i], Double.isNaN(util[i]) ? null : util[i], mem[i] < 0 ? null : mem[i],
                            Double.isNaN(temp[i]) ? null : temp[i], Double.isNaN(power[i]) ? null : power[i]));
                    sorted &= t[i] >= prev;
                    prev = t[i];
                }
            }
            if (!sorted) { // the clock stepped back: stable, so equal stamps keep the order they were taken in
                out.sort(Comparator.comparingLong(Point::t));
            }
            return out;
        }
    }
}
