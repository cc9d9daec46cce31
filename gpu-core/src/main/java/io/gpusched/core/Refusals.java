package io.gpusched.core;

import io.gpusched.core.DeviceState.Pool;
import io.gpusched.core.GpuAllocationException.Obstacle;
import io.gpusched.core.GpuAllocationException.Obstacle.Kind;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.IntFunction;

/**
 * Bounded refusal messages: past {@value #LIST_ALL} devices a refusal counts its obstacles by kind and names the
 * first {@value #FIRST} instead of every one (a 1,024-GPU node would otherwise put tens of KB in one message); the
 * full list stays in {@link GpuAllocationException#obstacles()}.
 */
final class Refusals {
    /** Up to this many obstacles, or ids, a message names each one. */
    static final int LIST_ALL = 8;
    /** Past {@link #LIST_ALL}, a message names this many first ones. */
    static final int FIRST = 4;
    /** Longest detail (holder id, health or pool reason) a message repeats, in characters. */
    static final int DETAIL = 120;

    private Refusals() {
    }

    /** @return what keeps {@code d} from a request, or null when nothing (it is free) */
    static Obstacle of(DeviceState d, boolean free) {
        String uuid = d.device().uuid();
        if (!d.health().isHealthy()) {
            return new Obstacle(d.index(), uuid, Kind.UNHEALTHY, d.health().toString());
        }
        if (d.pool() == Pool.QUARANTINED) {
            return new Obstacle(d.index(), uuid, Kind.QUARANTINED, d.poolReason().orElse(""));
        }
        if (d.pool() == Pool.DRAINING) {
            return new Obstacle(d.index(), uuid, Kind.DRAINING, d.poolReason().orElse(""));
        }
        if (free) {
            return null;
        }
        if (d.exclusiveHolder().isPresent()) {
            return new Obstacle(d.index(), uuid, Kind.HELD, d.exclusiveHolder().get());
        }
        if (d.isShared()) {
            return new Obstacle(d.index(), uuid, Kind.SHARED,
                    d.sharedHolders() + ", " + d.reservableMemory().toHumanString() + " left");
        }
        return null;
    }

    /**
     * @return each obstacle as a message has always named it ({@code GPU 3 by a-1f; GPU 4 shared by 2, 1 GiB
     *         left}) while there are at most {@value #LIST_ALL}; past that, counts by kind and the first ones
     */
    static String summary(List<Obstacle> obstacles) {
        if (obstacles.isEmpty()) {
            return "none";
        }
        if (obstacles.size() <= LIST_ALL) {
            List<String> parts = new ArrayList<>(obstacles.size());
            for (Obstacle o : obstacles) {
                parts.add(show(o));
            }
            return String.join("; ", parts);
        }
        Map<Kind, Integer> counts = new EnumMap<>(Kind.class);
        for (Obstacle o : obstacles) {
            counts.merge(o.kind(), 1, Integer::sum);
        }
        List<String> byKind = new ArrayList<>();
        counts.forEach((k, n) -> byKind.add(n + " " + word(k)));
        List<String> first = new ArrayList<>(FIRST);
        for (int i = 0; i < FIRST; i++) {
            first.add(show(obstacles.get(i)));
        }
        return obstacles.size() + " GPUs (" + String.join(", ", byKind) + "); the first " + FIRST + ": "
                + String.join("; ", first) + "; " + (obstacles.size() - FIRST)
                + " more in the refusal's obstacles (GpuAllocationException.obstacles())";
    }

    /**
     * @return {@code [0,1,2]} for a few; past {@value #LIST_ALL}, runs of consecutive numbers ({@code [0-1023]}),
     *         the first few runs and how many numbers there are in all
     */
    static String ids(List<Integer> indices) {
        if (indices.size() <= LIST_ALL) {
            List<String> parts = new ArrayList<>(indices.size());
            indices.forEach(i -> parts.add(String.valueOf(i)));
            return "[" + String.join(",", parts) + "]";
        }
        List<String> runs = new ArrayList<>();
        int k = 0;
        int n = indices.size();
        while (k < n && runs.size() < LIST_ALL) {
            int start = indices.get(k);
            int end = start;
            while (k + 1 < n && indices.get(k + 1) == end + 1) {
                end = indices.get(++k);
            }
            runs.add(start == end ? String.valueOf(start) : start + "-" + end);
            k++;
        }
        return "[" + String.join(",", runs) + (k < n ? ",…" : "") + "] (" + n + " in all)";
    }

    /**
     * @return the first few of {@code n} names and how many there are, or all of them when few
     */
    static String names(int n, IntFunction<String> name) {
        List<String> parts = new ArrayList<>();
        int shown = n <= LIST_ALL ? n : FIRST;
        for (int i = 0; i < shown; i++) {
            parts.add(name.apply(i));
        }
        return "[" + String.join(", ", parts) + (shown < n ? ", … " + (n - shown) + " more (" + n + " in all)" : "")
                + "]";
    }

    private static String show(Obstacle o) {
        String d = clip(o.detail());
        return switch (o.kind()) {
            case HELD -> "GPU " + o.deviceIndex() + " by " + d;
            case SHARED -> "GPU " + o.deviceIndex() + " shared by " + d;
            case DRAINING -> "GPU " + o.deviceIndex() + " draining" + (d.isEmpty() ? "" : ": " + d);
            case UNHEALTHY -> "GPU " + o.deviceIndex() + " " + d;
            case QUARANTINED -> "GPU " + o.deviceIndex() + " quarantined: " + d;
        };
    }

    private static String word(Kind k) {
        return switch (k) {
            case HELD -> "held exclusively";
            case SHARED -> "shared";
            default -> k.name().toLowerCase(Locale.ROOT);
        };
    }

    private static String clip(String s) {
        return s.length() <= DETAIL ? s : s.substring(0, DETAIL) + "… (" + s.length() + " characters)";
    }
}
