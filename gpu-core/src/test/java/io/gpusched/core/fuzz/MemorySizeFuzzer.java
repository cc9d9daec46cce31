package io.gpusched.core.fuzz;

import io.gpusched.core.MemorySize;

/**
 * Fuzz target for {@link MemorySize#parse(String)}: only IllegalArgumentException naming the input (its first 64
 * characters: a longer input is cut in the message); a parsed size is never negative and its {@code toString()} parses back to the same size.
 */
public final class MemorySizeFuzzer {
    private MemorySizeFuzzer() {
    }

    /** One input: the text to parse (UTF-8). */
    public static void fuzzerTestOneInput(byte[] input) {
        String s = Contract.text(input);
        MemorySize m = Contract.expect(IllegalArgumentException.class, s,
                msg -> msg.contains(s.length() <= 64 ? s : s.substring(0, 64))
                        || (s.isBlank() && msg.contains("blank")),
                () -> MemorySize.parse(s));
        if (m != null) {
            Contract.check(m.bytes() >= 0, "negative size " + m.bytes(), s);
            Contract.check(MemorySize.parse(m.toString()).equals(m), m + " does not parse back", s);
            m.toHumanString();
        }
    }
}
