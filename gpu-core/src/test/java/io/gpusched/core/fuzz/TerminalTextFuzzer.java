package io.gpusched.core.fuzz;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.internal.AsciiNumbers;
import io.gpusched.core.internal.Printable;
import java.io.IOException;
import java.math.BigInteger;
import java.util.Map;

/**
 * Fuzz target for the text rules of issue 36 ({@link Printable}, {@link AsciiNumbers}), judged by checkers written
 * here that share nothing with them: {@code escape} leaves nothing a terminal acts on and keeps plain ASCII as it is;
 * {@code escapeJson} keeps a JSON document's meaning (Jackson reads the same string back) and makes it terminal-safe;
 * {@code shellWord}, when it accepts, gives a word a POSIX shell reads back exactly (a small lexer here) and that is
 * terminal-safe; {@code requireIdentifier} accepts only terminal-safe text within its bound and otherwise names the
 * field; {@code GpuRequests.toIdentifier} turns any text into an owner the builder takes; {@code parseLong} accepts
 * only ASCII digits, reads them as decimal, and otherwise names the input.
 */
public final class TerminalTextFuzzer {
    private static final ObjectMapper JSON = new ObjectMapper();

    private TerminalTextFuzzer() {
    }

    /** One input: any text (UTF-8). */
    public static void fuzzerTestOneInput(byte[] input) {
        String s = Contract.text(input);
        String e = Printable.escape(s);
        Contract.check(terminalSafe(e, false), "escape left " + Contract.show(e), s);
        if (s.chars().allMatch(c -> c >= 0x20 && c < 0x7f)) {
            Contract.check(e.equals(s), "escape changed plain ASCII into " + Contract.show(e), s);
        }
        try {
            String json = Printable.escapeJson(JSON.writerWithDefaultPrettyPrinter().writeValueAsString(
                    Map.of("value", s)));
            Contract.check(terminalSafe(json, true), "escapeJson left " + Contract.show(json), s);
            Contract.check(JSON.readTree(json).path("value").asText().equals(s), "escapeJson changed the value",
                    s);
        } catch (IOException x) {
            throw new Contract.Violation("JSON of " + Contract.show(s) + " does not read back", x);
        }
        String word = Contract.expect(IllegalArgumentException.class, s, m -> m.contains("a word")
                && m.contains("expected"), () -> Printable.shellWord(s, "a word"));
        if (word != null) {
            Contract.check(terminalSafe(word, false), "shellWord left " + Contract.show(word), s);
            Contract.check(s.equals(shellReads(word)), "a shell reads " + Contract.show(word) + " back as "
                    + Contract.show(String.valueOf(shellReads(word))), s);
        }
        String id = Contract.expect(IllegalArgumentException.class, s, m -> m.startsWith("owner")
                && m.contains("expected"), () -> Printable.requireIdentifier(s, "owner", 128, false));
        if (id != null) {
            Contract.check(terminalSafe(id, false) && !id.isEmpty() && id.codePointCount(0, id.length()) <= 128,
                    "requireIdentifier accepted it", s);
        }
        // toIdentifier turns any text into an owner or job id the builder takes
        String made = GpuRequests.toIdentifier(s, 128);
        Contract.check(terminalSafe(made, false) && !made.isBlank() && made.codePointCount(0, made.length()) <= 128,
                "toIdentifier gave " + Contract.show(made), s);
        GpuRequest.builder().owner(made).jobId(made);
        Long n = Contract.expect(IllegalArgumentException.class, s, m -> m.startsWith("n:") && m.contains("expected"),
                () -> AsciiNumbers.parseLong(s, 0, 999_999_999_999L, "n"));
        if (n != null) {
            Contract.check(s.matches("[0-9]+") && new BigInteger(s).equals(BigInteger.valueOf(n)),
                    "parseLong read " + n, s);
        }
    }

    /** No C0 control (but a newline where allowed), DEL or C1 control, nothing that hides, reorders or breaks lines. */
    static boolean terminalSafe(String t, boolean newlines) {
        return t.chars().noneMatch(c -> (c < 0x20 && !(newlines && c == '\n')) || (c >= 0x7f && c <= 0x9f)
                || (c >= 0x200b && c <= 0x200f) || (c >= 0x202a && c <= 0x202e) || (c >= 0x2060 && c <= 0x2069)
                || c == 0x2028 || c == 0x2029 || c == 0xfeff);
    }

    /** What a POSIX shell reads from one word: quotes and backslashes removed; null when it is not one plain word. */
    static String shellReads(String word) {
        StringBuilder out = new StringBuilder();
        for (int i = 0; i < word.length(); i++) {
            char c = word.charAt(i);
            if (c == '\'') {
                int end = word.indexOf('\'', i + 1);
                if (end < 0) {
                    return null;
                }
                out.append(word, i + 1, end);
                i = end;
            } else if (c == '\\') {
                if (i + 1 == word.length()) {
                    return null;
                }
                out.append(word.charAt(++i));
            } else if (" \t\n|&;<>()$`\"*?[]#~{}!".indexOf(c) >= 0) {
                return null; // would split the word, substitute or glob
            } else {
                out.append(c);
            }
        }
        return out.toString();
    }
}
