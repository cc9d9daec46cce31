package io.gpusched.core.internal;

import java.time.Duration;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** Parses {@code "500ms"}, {@code "30s"}, {@code "5m"}, {@code "2h"}, {@code "1d"}. Internal. */
public final class Durations {
    private static final Pattern FORM = Pattern.compile("\\s*([0-9]{1,9})\\s*(ms|s|m|h|d)\\s*");

    private Durations() {
    }

    /** The longest duration accepted: 100 years. */
    public static final Duration MAX = Duration.ofDays(36_500);

    /** @throws IllegalArgumentException naming the input and the accepted forms, or the bound it is over */
    public static Duration parse(String text) {
        Matcher m = text == null ? null : FORM.matcher(text);
        if (m == null || !m.matches()) {
            throw new IllegalArgumentException("invalid duration \"" + text
                    + "\"; expected a whole number with a unit ms, s, m, h or d, e.g. \"30s\" or \"5m\"");
        }
        // at most 100 years: longer ones overflow the nanosecond and millisecond arithmetic of leases and waits
        long n = Long.parseLong(m.group(1));
        long max = switch (m.group(2)) {
            case "ms" -> MAX.toMillis();
            case "s" -> MAX.toSeconds();
            case "m" -> MAX.toMinutes();
            case "h" -> MAX.toHours();
            default -> MAX.toDays();
        };
        if (n > max) {
            throw new IllegalArgumentException("invalid duration \"" + text + "\"; at most " + MAX.toDays()
                    + "d (100 years)");
        }
        return switch (m.group(2)) {
            case "ms" -> Duration.ofMillis(n);
            case "s" -> Duration.ofSeconds(n);
            case "m" -> Duration.ofMinutes(n);
            case "h" -> Duration.ofHours(n);
            default -> Duration.ofDays(n);
        };
    }
}
