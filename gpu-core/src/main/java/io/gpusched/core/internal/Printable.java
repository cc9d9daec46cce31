package io.gpusched.core.internal;

import java.util.regex.Pattern;

/**
 * One rule for text that reaches a terminal: which characters are printable, how identifiers that enter a request
 * (owners, job ids, labels) are bounded, and how anything else is shown when it is printed. Printable: every code
 * point except controls (C0, DEL, C1: escape sequences, bells, newlines), format characters (bidirectional overrides,
 * zero-width characters), line and paragraph separators, spaces other than U+0020, surrogates, private-use and
 * unassigned code points. Internal: not part of the API.
 */
public final class Printable {
    private static final int CLIP = 40;
    private static final Pattern PLAIN_WORD = Pattern.compile("[A-Za-z0-9_@%+=:,./-]+");

    private Printable() {
    }

    /** @return whether {@code cp} may be printed as it is */
    public static boolean isPrintable(int cp) {
        if (cp == ' ') {
            return true;
        }
        return switch (Character.getType(cp)) {
            case Character.CONTROL, Character.FORMAT, Character.SURROGATE, Character.PRIVATE_USE,
                    Character.UNASSIGNED, Character.LINE_SEPARATOR, Character.PARAGRAPH_SEPARATOR,
                    Character.SPACE_SEPARATOR ->
                false;
            default -> true;
        };
    }

    /** @return whether every code point of {@code s} is printable (true for the empty string) */
    public static boolean isPrintable(CharSequence s) {
        return s.codePoints().allMatch(Printable::isPrintable);
    }

    /**
     * Shows {@code s} safely on a terminal: printable code points as they are, the rest as {@code \n}, {@code \r},
     * {@code \t}, {@code \xNN} (other code points below U+0100: ESC is {@code \x1b}), {@code \}{@code uNNNN} or
     * {@code \U00NNNNNN}. Nothing the result holds can move the cursor, change the title, start a new line or
     * reorder the text around it.
     *
     * @param s text from anywhere (a device name, an owner, a file); null prints as {@code null}
     * @return the text to print
     */
    public static String escape(CharSequence s) {
        if (s == null) {
            return "null";
        }
        if (isPrintable(s)) {
            return s.toString();
        }
        StringBuilder b = new StringBuilder(s.length() + 16);
        s.codePoints().forEach(cp -> {
            if (isPrintable(cp)) {
                b.appendCodePoint(cp);
            } else {
                b.append(escaped(cp));
            }
        });
        return b.toString();
    }

    /**
     * Makes a JSON document safe on a terminal with the same meaning: every code point that is not printable (Jackson
     * escapes C0 controls in strings, but writes C1 controls, bidirectional overrides and line separators raw) becomes
     * a {@code \}{@code uXXXX} escape (a surrogate pair above U+FFFF). Outside strings JSON holds only printable
     * characters, spaces and newlines, which stay.
     *
     * @param json a JSON document
     * @return the same document, every string's hostile characters escaped
     */
    public static String escapeJson(String json) {
        if (json == null || json.chars().allMatch(c -> c == '\n' || c == '\r' || c == '\t' || isPrintable(c))) {
            return json;
        }
        StringBuilder b = new StringBuilder(json.length() + 16);
        json.codePoints().forEach(cp -> {
            if (cp == '\n' || cp == '\r' || cp == '\t' || isPrintable(cp)) {
                b.appendCodePoint(cp);
            } else {
                for (char c : Character.toChars(cp)) {
                    b.append(String.format("\\u%04x", (int) c));
                }
            }
        });
        return b.toString();
    }

    /**
     * One word for a POSIX shell to read back exactly: as it is when it holds only characters no shell treats
     * specially ({@code A-Z a-z 0-9 _ @ % + = : , . / -}), else in single quotes (a quote inside as
     * {@code '\''}). A word that is not printable is refused: a newline would start a command of its own where the
     * output is read a line at a time, and escapes would reach the terminal.
     *
     * @param s    the word
     * @param what names it in the error
     * @return the word as a shell reads it back
     * @throws IllegalArgumentException naming {@code what} when {@code s} is empty or not printable
     */
    public static String shellWord(String s, String what) {
        if (s.isEmpty()) {
            return "''";
        }
        if (!isPrintable(s)) {
            throw new IllegalArgumentException(what + " \"" + clipped(s) + "\" holds a character a shell line cannot"
                    + " carry safely; expected printable text");
        }
        return PLAIN_WORD.matcher(s).matches() ? s : "'" + s.replace("'", "'\\''") + "'";
    }

    private static String escaped(int cp) {
        return switch (cp) {
            case '\n' -> "\\n";
            case '\r' -> "\\r";
            case '\t' -> "\\t";
            default -> cp < 0x100 ? String.format("\\x%02x", cp)
                    : cp < 0x10000 ? String.format("\\u%04x", cp) : String.format("\\U%08x", cp);
        };
    }

    /**
     * @return {@code s} escaped and, past {@value #CLIP} code points, cut with an ellipsis: for naming a hostile
     *         value in an error message without repeating all of it
     */
    public static String clipped(String s) {
        if (s == null) {
            return "null";
        }
        int n = s.codePointCount(0, s.length());
        String head = n <= CLIP ? s : s.substring(0, s.offsetByCodePoints(0, CLIP));
        return escape(head) + (n <= CLIP ? "" : "… (" + n + " characters)");
    }

    /**
     * Checks an identifier where it enters: printable and at most {@code max} code points.
     *
     * @param value      the value (already trimmed where the caller trims)
     * @param field      names it in the error ("owner", "job id", "label key")
     * @param max        most code points allowed
     * @param allowEmpty whether the empty string is valid
     * @return {@code value}
     * @throws IllegalArgumentException naming the field, the value (escaped, clipped) and what is valid
     */
    public static String requireIdentifier(String value, String field, int max, boolean allowEmpty) {
        if (value == null) {
            throw new IllegalArgumentException(field + " must not be null; expected " + rule(max, allowEmpty));
        }
        if (value.isEmpty() && !allowEmpty) {
            throw new IllegalArgumentException(field + " must not be empty; expected " + rule(max, false));
        }
        int n = value.codePointCount(0, value.length());
        if (n > max) {
            throw new IllegalArgumentException(field + " \"" + clipped(value) + "\" is " + n + " characters long;"
                    + " expected " + rule(max, allowEmpty));
        }
        int at = 0;
        for (int i = 0; i < value.length();) {
            int cp = value.codePointAt(i);
            if (!isPrintable(cp)) {
                throw new IllegalArgumentException(field + " \"" + clipped(value) + "\" holds the non-printable"
                        + " character " + escaped(cp) + " at position " + at + "; expected " + rule(max, allowEmpty));
            }
            i += Character.charCount(cp);
            at++;
        }
        return value;
    }

    private static String rule(int max, boolean allowEmpty) {
        return (allowEmpty ? "at most " : "1 to ") + max + " printable characters (letters, digits, punctuation,"
                + " symbols and plain spaces; no control, format or line-separator characters)";
    }
}
