package io.gpusched.accounting;

import io.gpusched.core.internal.Durations;
import java.time.DateTimeException;
import java.time.Instant;
import java.time.LocalDate;
import java.time.ZoneOffset;

/** The times a report takes ({@code --since}, {@code --until}, {@code ?since=}): one grammar, ASCII digits only. */
public final class ReportTimes {
    private ReportTimes() {
    }

    /**
     * @param name what the time is called in errors ({@code --since}, {@code since})
     * @param text a duration back from {@code now} ({@code 7d}, {@code 12h}, {@code 30m}, {@code 90s}), a UTC date
     *             ({@code 2026-01-31}) or an instant ({@code 2026-01-31T08:00:00Z})
     * @param now  what a duration counts back from
     * @return the time
     * @throws IllegalArgumentException naming the input and the valid forms
     */
    public static Instant parse(String name, String text, Instant now) {
        try {
            if (text.matches("[0-9]{4}-[0-9]{2}-[0-9]{2}")) {
                return LocalDate.parse(text).atStartOfDay().toInstant(ZoneOffset.UTC);
            }
            if (text.matches("[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}(:[0-9]{2}(\\.[0-9]{1,9})?)?Z")) {
                return Instant.parse(text.length() == 17 ? text.replace("Z", ":00Z") : text);
            }
            if (text.matches("[0-9]{1,6}(ms|s|m|h|d)")) {
                return now.minus(Durations.parse(text));
            }
        } catch (DateTimeException | IllegalArgumentException | ArithmeticException e) {
            // the message below
        }
        throw new IllegalArgumentException(name + " \"" + RecordCodec.printable(text) + "\" is not a time; use a"
                + " duration back from now (7d, 12h, 30m), a date (2026-01-31) or an instant (2026-01-31T08:00:00Z)");
    }
}
