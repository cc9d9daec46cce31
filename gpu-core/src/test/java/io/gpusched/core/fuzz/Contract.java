package io.gpusched.core.fuzz;

import java.nio.charset.StandardCharsets;
import java.util.function.Predicate;
import java.util.function.Supplier;
import java.util.regex.Pattern;

/**
 * The contract every gpusched parser keeps on hostile input, checked by the fuzz targets: it returns, or throws the
 * one exception type its Javadoc documents, with a message that names the input and says what would be valid.
 * Any other exception, an {@link Error} (stack overflow, out of memory) or a hang is a finding. Independent of the
 * parsers: it judges only what they return or throw.
 */
public final class Contract {

    /** Words by which a message says what would be valid. */
    private static final Pattern SAYS_WHAT_IS_VALID = Pattern.compile(
            "(?i)expected|valid|must|needs? |required|e\\.g\\.|known flags|accepted|set \\w+|not both|at most|at least"
                    + "|only|give |one of|use ");

    private Contract() {
    }

    /** Thrown by a fuzz target when a parser breaks its contract; Jazzer reports it as a finding. */
    public static final class Violation extends AssertionError {
        /** @param message what was broken, with the input */
        public Violation(String message, Throwable cause) {
            super(message, cause);
        }

        /** @param message what was broken, with the input */
        public Violation(String message) {
            super(message);
        }
    }

    /** @return the input as text (invalid UTF-8 becomes U+FFFD, as when a parser reads a file as UTF-8) */
    public static String text(byte[] input) {
        return new String(input, StandardCharsets.UTF_8);
    }

    /** @return a short, printable rendering of an input for messages */
    public static String show(String input) {
        String s = input.length() > 300 ? input.substring(0, 300) + "...(" + input.length() + " chars)" : input;
        StringBuilder b = new StringBuilder("\"");
        s.codePoints().forEach(c -> {
            if (c < 0x20 || c == 0x7f) {
                b.append(String.format("\\u%04x", c));
            } else {
                b.appendCodePoint(c);
            }
        });
        return b.append('"').toString();
    }

    /**
     * Runs a parser on one input.
     *
     * @param documented the only exception type the parser documents
     * @param input      the input, for messages
     * @param namesInput whether an error message names the input (and what is wrong with it)
     * @return the parser's result, or null when it threw the documented exception with a good message
     * @throws Violation for any other exception, or a message that does not name the input or what is valid
     */
    public static <T> T expect(Class<? extends RuntimeException> documented, String input,
            Predicate<String> namesInput, Supplier<T> parser) {
        try {
            return parser.get();
        } catch (RuntimeException e) {
            // exactly the documented type: a NumberFormatException or PatternSyntaxException escaping from inside is
            // an IllegalArgumentException by inheritance only, and says nothing a user can act on
            if (e.getClass() != documented) {
                throw new Violation("threw " + e.getClass().getName() + " where only " + documented.getSimpleName()
                        + " is documented, for input " + show(input), e);
            }
            String m = e.getMessage();
            if (m == null || m.isBlank()) {
                throw new Violation(documented.getSimpleName() + " without a message for input " + show(input), e);
            }
            if (!namesInput.test(m)) {
                throw new Violation("message does not name the input: " + show(m) + " for input " + show(input), e);
            }
            if (!SAYS_WHAT_IS_VALID.matcher(m).find()) {
                throw new Violation("message does not say what would be valid: " + show(m) + " for input "
                        + show(input), e);
            }
            return null;
        }
    }

    /** Fails with a {@link Violation} unless {@code condition} holds. */
    public static void check(boolean condition, String what, String input) {
        if (!condition) {
            throw new Violation(what + ", for input " + show(input));
        }
    }
}
