package io.gpusched.cli;

import io.gpusched.core.internal.Printable;
import java.util.regex.Pattern;

/**
 * Text printed for a shell to read ({@code allocate --format env}, {@code --format docker}, the release line): each
 * word by {@link Printable#shellWord} (as it is when no shell treats any of its characters specially, so ordinary
 * values stay the plain {@code KEY=VALUE} that docker's {@code --env-file} also reads; else single-quoted); a value a
 * shell line cannot carry safely (a control character such as a newline, which would start a command of its own) is
 * refused.
 */
public final class ShellText {
    private static final Pattern NAME = Pattern.compile("[A-Za-z_][A-Za-z0-9_]*");

    private ShellText() {
    }

    /**
     * @param s    one word
     * @param what names it in the error
     * @return the word as a POSIX shell reads it back: bare or single-quoted
     * @throws CliException when it holds a character that is not printable (nothing is printed)
     */
    public static String word(String s, String what) {
        try {
            return Printable.shellWord(s, what);
        } catch (IllegalArgumentException e) {
            throw new CliException(e.getMessage() + "; nothing printed");
        }
    }

    /**
     * @return {@code NAME=value} for a shell's {@code eval}
     * @throws CliException when the name is not a variable name or the value cannot be carried
     */
    public static String assignment(String name, String value) {
        if (!NAME.matcher(name).matches()) {
            throw new CliException("variable name \"" + Printable.clipped(name) + "\" is not a shell variable name;"
                    + " nothing printed");
        }
        return name + "=" + word(value, name + "'s value");
    }
}
