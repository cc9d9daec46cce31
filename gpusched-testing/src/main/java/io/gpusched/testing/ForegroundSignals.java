package io.gpusched.testing;

import java.io.IOException;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A command prefix that gives a child the signal dispositions of a shell's foreground job (SIGINT and SIGQUIT at their
 * default) even when the test runs where they are ignored: a build started in the background of a non-interactive
 * shell, or under {@code nohup}, ignores them, and an ignored signal stays ignored through exec. Tests that send a
 * child Ctrl-C start it through this prefix.
 */
public final class ForegroundSignals {
    private static final List<String> PREFIX = probe();

    private ForegroundSignals() {
    }

    /** @return {@code /usr/bin/env --default-signal=INT,QUIT --} where coreutils has it (8.31 and later), else empty */
    public static List<String> prefix() {
        return PREFIX;
    }

    private static List<String> probe() {
        List<String> p = List.of("/usr/bin/env", "--default-signal=INT,QUIT", "--");
        try {
            Process t = new ProcessBuilder("/usr/bin/env", "--default-signal=INT,QUIT", "--", "/bin/true")
                    .redirectErrorStream(true).start();
            t.getInputStream().readAllBytes();
            return t.waitFor(10, TimeUnit.SECONDS) && t.exitValue() == 0 ? p : List.of();
        } catch (IOException e) {
            return List.of();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return List.of();
        }
    }
}
