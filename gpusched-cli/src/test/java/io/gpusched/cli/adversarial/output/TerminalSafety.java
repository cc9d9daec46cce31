package io.gpusched.cli.adversarial.output;

import java.util.ArrayList;
import java.util.List;

/**
 * An independent judge of text printed to a terminal (it shares nothing with the command's escaping): what may not
 * appear raw is any C0 control but a newline, DEL, any C1 control, and the characters that reorder or hide text or
 * break a line where a terminal shows none (zero-width characters, bidirectional embeddings, overrides and isolates,
 * line and paragraph separators, the byte-order mark).
 */
final class TerminalSafety {
    private TerminalSafety() {
    }

    /** @return each unsafe character of {@code text} with its offset, empty when the text is safe */
    static List<String> unsafe(String text) {
        List<String> bad = new ArrayList<>();
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            boolean control = (c < 0x20 && c != '\n') || (c >= 0x7f && c <= 0x9f);
            boolean hidden = (c >= 0x200b && c <= 0x200f) || (c >= 0x202a && c <= 0x202e)
                    || (c >= 0x2060 && c <= 0x2069) || c == 0x2028 || c == 0x2029 || c == 0xfeff;
            if (control || hidden) {
                bad.add(String.format("U+%04X at %d", (int) c, i));
            }
        }
        return bad;
    }
}
