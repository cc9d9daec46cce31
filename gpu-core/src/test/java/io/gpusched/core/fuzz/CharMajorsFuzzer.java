package io.gpusched.core.fuzz;

import io.gpusched.core.devices.CharMajors;

/**
 * Fuzz target for {@link CharMajors#parse(String)} (a simulated node's {@code char_majors} property): only
 * IllegalArgumentException naming the input (its first 200 characters) and what is valid; parsed majors are 1..4095
 * and format back to majors that parse to the same.
 */
public final class CharMajorsFuzzer {
    private CharMajorsFuzzer() {
    }

    /** One input: the {@code name=major,...} text (UTF-8). */
    public static void fuzzerTestOneInput(byte[] input) {
        String s = Contract.text(input);
        CharMajors m = Contract.expect(IllegalArgumentException.class, s,
                msg -> msg.contains(s.length() <= 200 ? s : s.substring(0, 200)), () -> CharMajors.parse(s));
        if (m != null) {
            Contract.check(m.asMap().values().stream().allMatch(v -> v >= 1 && v <= CharMajors.MAX_MAJOR),
                    "major out of 1..4095 in " + m, s);
            Contract.check(CharMajors.parse(m.format()).equals(m), m + " does not parse back", s);
        }
    }
}
