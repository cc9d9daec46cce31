package io.gpusched.core.internal;

/**
 * The one rule for whole numbers a user writes (flags, ports, counts, file fields): ASCII digits {@code 0-9} only, no
 * sign, no spaces, no other script's digits ({@link Integer#parseInt} reads {@code "٣"} as 3 and {@code "+1"} as
 * 1; the programs gpusched's files are written for, such as Slurm's {@code strtol} or a shell, do not), within a
 * range. Internal: not part of the API.
 */
public final class AsciiNumbers {
    private AsciiNumbers() {
    }

    /** @return whether {@code s} is one or more ASCII digits and nothing else */
    public static boolean isDigits(CharSequence s) {
        if (s == null || s.length() == 0) {
            return false;
        }
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c < '0' || c > '9') {
                return false;
            }
        }
        return true;
    }

    /**
     * Parses a whole number of ASCII digits within {@code [min, max]} ({@code 0 <= min <= max < 10^18}; leading
     * zeros are read as decimal, never octal).
     *
     * @param text the text, exactly as given (nothing is trimmed)
     * @param what names it in errors ("--gpu", "the port of --listen"); empty: the caller names it
     * @throws IllegalArgumentException naming {@code what}, the text (escaped) and the valid range
     */
    public static long parseLong(String text, long min, long max, String what) {
        if (!isDigits(text)) {
            throw new IllegalArgumentException(
                    prefix(what) + "\"" + Printable.clipped(text) + "\" is not a whole number;"
                            + " expected ASCII digits 0-9 (no sign, no spaces) from " + min + " to " + max);
        }
        String digits = text.replaceFirst("^0+(?=.)", "");
        if (digits.length() > 18 || Long.parseLong(digits) < min || Long.parseLong(digits) > max) {
            throw new IllegalArgumentException(prefix(what) + Printable.clipped(text) + " is out of range; expected a"
                    + " whole number from " + min + " to " + max);
        }
        return Long.parseLong(digits);
    }

    private static String prefix(String what) {
        return what.isEmpty() ? "" : what + ": ";
    }

    /** As {@link #parseLong}, for an {@code int} range. */
    public static int parseInt(String text, int min, int max, String what) {
        return (int) parseLong(text, min, max, what);
    }
}
