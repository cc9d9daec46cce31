package io.gpusched.core;

import java.math.BigDecimal;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * An amount of memory in bytes. Units are binary throughout ({@code 1K = 1024}); a bare number means MiB, as users
 * of GPU schedulers write {@code gpu_memory_mb: 4096}.
 *
 * @param bytes the size in bytes, never negative
 */
public record MemorySize(long bytes) implements Comparable<MemorySize> {

    /** Zero bytes. */
    public static final MemorySize ZERO = new MemorySize(0);

    private static final long KIB = 1L << 10;
    private static final long MIB = 1L << 20;
    private static final long GIB = 1L << 30;
    private static final long TIB = 1L << 40;
    private static final Pattern FORM = Pattern.compile("([0-9]+(?:\\.[0-9]+)?)\\s*([A-Za-z]*)");
    private static final String ACCEPTED = "a non-negative number with an optional binary unit, e.g. \"8GB\", \"8G\","
            + " \"8GiB\", \"4096MB\", \"4096M\" or \"4096\" (a bare number is MiB); units B, K/KB/KiB, M/MB/MiB,"
            + " G/GB/GiB, T/TB/TiB";

    /** @throws IllegalArgumentException if {@code bytes} is negative */
    public MemorySize {
        if (bytes < 0) {
            throw new IllegalArgumentException("memory size must not be negative: " + bytes + " bytes");
        }
    }

    /** @return a size of {@code bytes} bytes */
    public static MemorySize ofBytes(long bytes) {
        return new MemorySize(bytes);
    }

    /** @return a size of {@code mib} MiB */
    public static MemorySize ofMebibytes(long mib) {
        return new MemorySize(Math.multiplyExact(mib, MIB));
    }

    /** @return a size of {@code gib} GiB */
    public static MemorySize ofGibibytes(long gib) {
        return new MemorySize(Math.multiplyExact(gib, GIB));
    }

    /**
     * Parses {@code "8GB"}, {@code "8G"}, {@code "8GiB"}, {@code "4096MB"}, {@code "4096M"}, {@code "4096"} (MiB),
     * {@code "1.5GiB"} and {@code "512B"}; case-insensitive, binary units.
     *
     * @throws IllegalArgumentException naming the input and the accepted forms for null, blanks, negatives,
     *                                  unknown units, fractions of a byte and values past {@code Long.MAX_VALUE}
     *                                  bytes; no other exception is thrown for any text
     */
    public static MemorySize parse(String text) {
        if (text == null || text.isBlank()) {
            throw new IllegalArgumentException("memory size is blank; expected " + ACCEPTED);
        }
        Matcher m = FORM.matcher(text.trim());
        if (!m.matches()) {
            throw new IllegalArgumentException("invalid memory size " + quote(text) + "; expected " + ACCEPTED);
        }
        long unit = unit(m.group(2));
        if (unit == 0) {
            throw new IllegalArgumentException("unknown unit " + quote(m.group(2)) + " in memory size " + quote(text)
                    + "; expected " + ACCEPTED);
        }
        // Bound the digits before BigDecimal: its parse is quadratic in the digit count (5 million digits took
        // minutes). Past 19 integer digits the value exceeds Long.MAX_VALUE whatever the unit; past 40 significant
        // fraction digits no binary unit (at most 2^40) makes it a whole number of bytes.
        String number = m.group(1);
        int dot = number.indexOf('.');
        String whole = stripLeading(dot < 0 ? number : number.substring(0, dot));
        String fraction = dot < 0 ? "" : stripTrailing(number.substring(dot + 1));
        if (whole.length() > 19) {
            throw new IllegalArgumentException("memory size " + quote(text) + " is too large: at most 2^63-1 bytes"
                    + " (8 EiB); expected " + ACCEPTED);
        }
        if (fraction.length() > 40) {
            throw new IllegalArgumentException("memory size " + quote(text) + " is not a whole number of bytes;"
                    + " expected " + ACCEPTED);
        }
        BigDecimal value = new BigDecimal((whole.isEmpty() ? "0" : whole) + (fraction.isEmpty() ? "" : "." + fraction))
                .multiply(BigDecimal.valueOf(unit));
        if (value.compareTo(BigDecimal.valueOf(Long.MAX_VALUE)) > 0) {
            throw new IllegalArgumentException("memory size " + quote(text) + " is too large: at most 2^63-1 bytes"
                    + " (8 EiB); expected " + ACCEPTED);
        }
        try {
            return new MemorySize(value.longValueExact());
        } catch (ArithmeticException e) {
            throw new IllegalArgumentException("memory size " + quote(text) + " is not a whole number of bytes;"
                    + " expected " + ACCEPTED, e);
        }
    }

    private static String stripLeading(String digits) {
        int i = 0;
        while (i < digits.length() && digits.charAt(i) == '0') {
            i++;
        }
        return digits.substring(i);
    }

    private static String stripTrailing(String digits) {
        int i = digits.length();
        while (i > 0 && digits.charAt(i - 1) == '0') {
            i--;
        }
        return digits.substring(0, i);
    }

    /** The input in quotes for a message, cut after 64 characters so a huge input does not make a huge message. */
    private static String quote(String text) {
        return "\"" + (text.length() <= 64 ? text : text.substring(0, 64) + "\u2026 (" + text.length() + " characters)")
                + "\"";
    }

    private static long unit(String suffix) {
        switch (suffix.toUpperCase(Locale.ROOT)) {
            case "":
            case "M":
            case "MB":
            case "MI":
            case "MIB":
                return MIB;
            case "B":
                return 1;
            case "K":
            case "KB":
            case "KI":
            case "KIB":
                return KIB;
            case "G":
            case "GB":
            case "GI":
            case "GIB":
                return GIB;
            case "T":
            case "TB":
            case "TI":
            case "TIB":
                return TIB;
            default:
                return 0;
        }
    }

    /** @return the size in whole MiB, rounded down */
    public long toMebibytes() {
        return bytes / MIB;
    }

    /** @return this plus {@code other} */
    public MemorySize plus(MemorySize other) {
        return new MemorySize(Math.addExact(bytes, other.bytes));
    }

    /** @return this minus {@code other}, never below zero */
    public MemorySize minusOrZero(MemorySize other) {
        return new MemorySize(Math.max(0, bytes - other.bytes));
    }

    /** @return true if this is at least {@code other} */
    public boolean isAtLeast(MemorySize other) {
        return bytes >= other.bytes;
    }

    @Override
    public int compareTo(MemorySize o) {
        return Long.compare(bytes, o.bytes);
    }

    /** @return a rounded, human form such as {@code "31.7 GiB"}, for messages (not for parsing back) */
    public String toHumanString() {
        if (bytes >= GIB) {
            return human(bytes, GIB, "GiB");
        }
        if (bytes >= MIB) {
            return human(bytes, MIB, "MiB");
        }
        if (bytes >= KIB) {
            return human(bytes, KIB, "KiB");
        }
        return bytes + " B";
    }

    private static String human(long b, long unit, String name) {
        if (b % unit == 0) {
            return (b / unit) + " " + name;
        }
        return String.format(Locale.ROOT, "%.1f %s", (double) b / unit, name);
    }

    /**
     * @return the exact size in the largest binary unit that divides it ({@code "8GiB"}, {@code "1536MiB"}); parses
     * back
     */
    @Override
    public String toString() {
        if (bytes != 0) {
            if (bytes % TIB == 0) {
                return bytes / TIB + "TiB";
            }
            if (bytes % GIB == 0) {
                return bytes / GIB + "GiB";
            }
            if (bytes % MIB == 0) {
                return bytes / MIB + "MiB";
            }
            if (bytes % KIB == 0) {
                return bytes / KIB + "KiB";
            }
        }
        return bytes + "B";
    }
}
