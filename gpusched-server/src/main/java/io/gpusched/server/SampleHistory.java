package io.gpusched.server;

import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.TreeMap;

/**
 * The console's per-GPU sample history: for each GPU a fixed-size ring of primitive columns (time, utilization, memory
 * used, temperature, power) holding the last {@code window} at the sampling interval. Memory is fixed at construction
 * ({@code capacity} points per GPU, whatever the uptime); a point older than the window (by the injected clock) is not
 * served even when the ring still holds it, so a paused sampler never shows stale minutes as recent.
 */
final class SampleHistory {
    /** One sampled point of one GPU; null fields were not reported. */
    record Point(long t, Double util, Long memUsed, Double temp, Double power) {
    }

    private final Clock clock;
    private final Duration window;
    private final int capacity;
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
        this.capacity = (int) Math.min(1_000_000, Math.max(2, window.toMillis() / per + 1));
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
        rings.computeIfAbsent(gpu, g -> new Ring(capacity)).add(p);
    }

    /**
     * @param gpu    one GPU index, or empty for all
     * @param window how far back from now (at most the history's window)
     * @return each GPU's points within the window, oldest first
     */
    synchronized Map<Integer, List<Point>> points(Optional<Integer> gpu, Duration window) {
        Duration w = window.compareTo(this.window) > 0 ? this.window : window;
        long from = clock.millis() - w.toMillis();
        Map<Integer, List<Point>> out = new LinkedHashMap<>();
        rings.forEach((i, r) -> {
            if (gpu.isEmpty() || gpu.get().equals(i)) {
                out.put(i, r.since(from));
            }
        });
        return out;
    }

    /** Parses a window such as {@code 10m}, {@code 90s}, {@code 1h}, {@code 500ms} or ISO-8601 {@code PT10M}. */
    static Duration parseWindow(String s) {
        String v = s.trim();
        try {
            if (v.startsWith("P") || v.startsWith("p")) {
                return positive(s, Duration.parse(v));
            }
            if (v.endsWith("ms")) {
                return positive(s, Duration.ofMillis(Long.parseLong(v.substring(0, v.length() - 2))));
            }
            if (!v.isEmpty()) {
                long n = Long.parseLong(v.substring(0, v.length() - 1));
                switch (v.charAt(v.length() - 1)) {
                    case 's':
                        return positive(s, Duration.ofSeconds(n));
                    case 'm':
                        return positive(s, Duration.ofMinutes(n));
                    case 'h':
                        return positive(s, Duration.ofHours(n));
                    default:
                        break;
                }
            }
        } catch (RuntimeException e) {
            // fall through to the message below
        }
        throw new IllegalArgumentException("window=" + s + " is not a duration; use e.g. 10m, 90s, 1h, 500ms or"
                + " PT10M");
    }

    private static Duration positive(String s, Duration d) {
        if (d.isNegative() || d.isZero()) {
            throw new IllegalArgumentException("window=" + s + " must be positive");
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

        Ring(int capacity) {
            t = new long[capacity];
            util = new double[capacity];
            mem = new long[capacity];
            temp = new double[capacity];
            power = new double[capacity];
        }

        void add(Point p) {
            t[next] = p.t();
            util[next] = p.util() == null ? Double.NaN : p.util();
            mem[next] = p.memUsed() == null ? -1 : p.memUsed();
            temp[next] = p.temp() == null ? Double.NaN : p.temp();
            power[next] = p.power() == null ? Double.NaN : p.power();
            next = (next + 1) % t.length;
            size = Math.min(size + 1, t.length);
        }

        List<Point> since(long from) {
            List<Point> out = new ArrayList<>(size);
            int start = (next - size + t.length) % t.length;
            for (int k = 0; k < size; k++) {
                int i = (start + k) % t.length;
                if (t[i] >= from) {
                    out.add(new Point(t[i], Double.isNaN(util[i]) ? null : util[i], mem[i] < 0 ? null : mem[i],
                            Double.isNaN(temp[i]) ? null : temp[i], Double.isNaN(power[i]) ? null : power[i]));
                }
            }
            return out;
        }
    }
}
