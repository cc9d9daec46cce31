package io.gpusched.core.fuzz;

import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.internal.Printable;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Fuzz target for {@link GpuRequests#fromCliFlags(List)}. The input is the argument list, one argument per line
 * ({@code <null>} stands for a null argument). Contract: only IllegalArgumentException, naming the offending
 * argument or flag (as printed: escaped, and cut after 40 characters); and, judged here independently of the
 * parser, a flag given twice (other than {@code --label} with distinct keys; {@code --gpu} and {@code --gpus} are one
 * flag) is refused.
 */
public final class CliFlagsFuzzer {
    private CliFlagsFuzzer() {
    }

    /** One input: arguments separated by newlines. */
    public static void fuzzerTestOneInput(byte[] input) {
        String s = Contract.text(input);
        List<String> args = new ArrayList<>();
        for (String line : s.split("\n", -1)) {
            args.add(line.equals("<null>") ? null : line);
        }
        if (args.size() > 64) {
            return; // a command line, not a document: the parser is linear in its arguments
        }
        GpuRequest r = Contract.expect(IllegalArgumentException.class, s, msg -> namesAnArgument(msg, args),
                () -> GpuRequests.fromCliFlags(args));
        if (r != null) {
            String repeated = repeatedFlag(args);
            Contract.check(repeated == null, "accepted " + repeated + " given twice", s);
            Contract.check(r.count() >= 1, "count " + r.count(), s);
        }
    }

    private static boolean namesAnArgument(String msg, List<String> args) {
        for (String a : args) {
            if (a == null) {
                if (msg.contains("null")) {
                    return true;
                }
                continue;
            }
            int eq = a.indexOf('=');
            String flag = eq >= 0 ? a.substring(0, eq) : a;
            if ((!flag.isEmpty() && msg.contains(flag)) || msg.contains(a.trim())) {
                return true;
            }
            // hostile text is named as it prints: escaped, and cut after 40 characters
            if ((!flag.isEmpty() && msg.contains(Printable.clipped(flag))) || msg.contains(Printable.clipped(a))) {
                return true;
            }
        }
        return false;
    }

    /** @return a flag given twice in a fully {@code --flag=value} command line, or null; judged independently */
    static String repeatedFlag(List<String> args) {
        Set<String> seen = new HashSet<>();
        Map<String, String> labels = new HashMap<>();
        for (String a : args) {
            if (a == null || !a.startsWith("--") || a.indexOf('=') < 0) {
                return null; // "--flag value" pairs: not judged here
            }
            String flag = a.substring(0, a.indexOf('='));
            if (flag.equals("--gpus")) {
                flag = "--gpu";
            }
            if (flag.equals("--label")) {
                String kv = a.substring(a.indexOf('=') + 1).trim();
                int eq = kv.indexOf('=');
                if (eq > 0 && labels.put(kv.substring(0, eq).trim(), kv) != null) {
                    return "--label " + kv.substring(0, eq);
                }
            } else if (!seen.add(flag)) {
                return flag;
            }
        }
        return null;
    }
}
