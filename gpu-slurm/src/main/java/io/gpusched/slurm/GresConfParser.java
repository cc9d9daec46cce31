package io.gpusched.slurm;

import io.gpusched.core.internal.AsciiNumbers;
import io.gpusched.core.internal.Printable;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.Set;
import java.util.SortedSet;
import java.util.TreeSet;

/**
 * Reads the {@code Name=gpu} records of a {@code gres.conf} (Slurm 22.05 to 25.x syntax): whitespace-separated
 * {@code Key=Value} pairs, keys case-insensitive, {@code #} comments, {@code \} continuations, {@code File=} ranges
 * such as {@code /dev/nvidia[0-3,5]}. Lines of other GRES names and lines for other nodes ({@code NodeName=}) are
 * skipped. Anything else it does not know is a {@link GresConfException} naming the line.
 */
public final class GresConfParser {
    /** Keys Slurm's gres.conf accepts (lower case). */
    static final Set<String> KEYS = Set.of("autodetect", "count", "cores", "cpus", "file", "flags", "links",
            "multiplefiles", "name", "nodename", "type");
    /** Longest line or file accepted: a gres.conf is a few hundred lines. */
    static final int MAX_CHARS = 4 << 20;

    private GresConfParser() {
    }

    /**
     * @param text     the file's text
     * @param nodeName this node's name: lines with a {@code NodeName=} that does not name it are skipped; empty to
     *                 keep every line
     * @return the gpu records in file order
     * @throws GresConfException naming the first line gpusched cannot read
     */
    public static List<GresRecord> parse(String text, Optional<String> nodeName) {
        if (text.length() > MAX_CHARS) {
            throw new GresConfException(1, "the file has " + text.length() + " characters; a gres.conf of more than "
                    + MAX_CHARS + " is not read");
        }
        List<GresRecord> out = new ArrayList<>();
        String[] lines = text.split("\n", -1);
        StringBuilder logical = new StringBuilder();
        int start = 0;
        for (int i = 0; i < lines.length; i++) {
            String l = lines[i];
            int hash = l.indexOf('#');
            if (hash >= 0) {
                l = l.substring(0, hash);
            }
            l = l.strip();
            if (logical.length() == 0) {
                start = i + 1;
            }
            if (l.endsWith("\\")) {
                logical.append(l, 0, l.length() - 1).append(' ');
                continue;
            }
            logical.append(l);
            String full = logical.toString().strip();
            logical.setLength(0);
            if (!full.isEmpty()) {
                record(full, start, nodeName).ifPresent(out::add);
            }
        }
        String rest = logical.toString().strip(); // the last line ended in a continuation: it still counts
        if (!rest.isEmpty()) {
            record(rest, start, nodeName).ifPresent(out::add);
        }
        return out;
    }

    private static Optional<GresRecord> record(String text, int line, Optional<String> nodeName) {
        Map<String, String> kv = new LinkedHashMap<>();
        for (String tok : text.split("\\s+")) {
            int eq = tok.indexOf('=');
            if (eq <= 0) {
                throw new GresConfException(line, "\"" + clip(tok) + "\" is not Key=Value; gres.conf lines are"
                        + " pairs such as Name=gpu File=/dev/nvidia0");
            }
            String key = tok.substring(0, eq).toLowerCase(Locale.ROOT);
            if (!KEYS.contains(key)) {
                throw new GresConfException(line, "unknown key \"" + clip(tok.substring(0, eq)) + "\"; valid keys are"
                        + " " + new TreeSet<>(KEYS));
            }
            if (kv.put(key, tok.substring(eq + 1)) != null) {
                throw new GresConfException(line, "key " + tok.substring(0, eq) + " given twice");
            }
        }
        if (kv.containsKey("nodename") && nodeName.isPresent()
                && !expand(kv.get("nodename"), line, "NodeName").contains(nodeName.get())) {
            return Optional.empty();
        }
        String name = kv.get("name");
        if (name == null) {
            if (kv.containsKey("file") || kv.containsKey("type") || kv.containsKey("multiplefiles")) {
                throw new GresConfException(line, "a line with File/Type but no Name=; expected Name=gpu");
            }
            return Optional.empty(); // AutoDetect= or NodeName= defaults
        }
        if (!name.equalsIgnoreCase("gpu")) {
            return Optional.empty();
        }
        if (kv.containsKey("file") && kv.containsKey("multiplefiles")) {
            throw new GresConfException(line, "File= and MultipleFiles= on one line; Slurm takes one or the other");
        }
        List<String> files = new ArrayList<>();
        boolean multiple = kv.containsKey("multiplefiles");
        String f = multiple ? kv.get("multiplefiles") : kv.get("file");
        if (f != null) {
            for (String part : splitOutsideBrackets(f, line)) {
                files.addAll(expand(part, line, multiple ? "MultipleFiles" : "File"));
            }
        }
        Optional<SortedSet<Integer>> cores = Optional.empty();
        String c = kv.containsKey("cores") ? kv.get("cores") : kv.get("cpus");
        if (c != null) {
            try {
                cores = Optional.of(new TreeSet<>(GresRecord.parseIntList(c)));
            } catch (IllegalArgumentException e) {
                throw new GresConfException(line, "Cores=" + clip(c) + ": " + e.getMessage());
            }
        }
        Optional<List<Integer>> links = Optional.empty();
        if (kv.containsKey("links")) {
            List<Integer> l = new ArrayList<>();
            for (String v : kv.get("links").split(",", -1)) {
                try {
                    int n = v.strip().equals("-1") ? -1 : GresRecord.number(v.strip());
                    if (n < -1) {
                        throw new NumberFormatException();
                    }
                    l.add(n);
                } catch (NumberFormatException e) {
                    throw new GresConfException(line, "Links=" + clip(kv.get("links")) + " is not a list of link"
                            + " counts; expected -1 for the device itself and counts >= 0, e.g. Links=-1,2,0,1");
                }
            }
            links = Optional.of(l);
        }
        OptionalLong count = OptionalLong.empty();
        if (kv.containsKey("count")) {
            count = OptionalLong.of(parseCount(kv.get("count"), line));
        }
        List<String> flags = kv.containsKey("flags")
                ? List.of(kv.get("flags").toLowerCase(Locale.ROOT).split(",")) : List.of();
        return Optional.of(new GresRecord(Optional.ofNullable(kv.get("type")), files, multiple, cores, links, flags,
                count, line));
    }

    private static long parseCount(String v, int line) {
        String s = v.toUpperCase(Locale.ROOT);
        long mult = 1;
        if (!s.isEmpty() && "KMGTP".indexOf(s.charAt(s.length() - 1)) >= 0) {
            mult = 1L << (10 * ("KMGTP".indexOf(s.charAt(s.length() - 1)) + 1));
            s = s.substring(0, s.length() - 1);
        }
        try {
            if (!AsciiNumbers.isDigits(s) || s.length() > 18) {
                throw new NumberFormatException(s);
            }
            long n = Long.parseLong(s);
            if (n < 0 || n > (Long.MAX_VALUE / mult)) {
                throw new NumberFormatException();
            }
            return n * mult;
        } catch (NumberFormatException e) {
            throw new GresConfException(line, "Count=" + clip(v) + " is not a count; expected a number with an"
                    + " optional K, M, G, T or P suffix");
        }
    }

    private static List<String> splitOutsideBrackets(String s, int line) {
        List<String> out = new ArrayList<>();
        int depth = 0;
        int from = 0;
        for (int i = 0; i < s.length(); i++) {
            char ch = s.charAt(i);
            if (ch == '[') {
                depth++;
            } else if (ch == ']') {
                depth--;
                if (depth < 0) {
                    throw new GresConfException(line, "unbalanced ] in " + clip(s));
                }
            } else if (ch == ',' && depth == 0) {
                out.add(s.substring(from, i));
                from = i + 1;
            }
        }
        if (depth != 0) {
            throw new GresConfException(line, "unbalanced [ in " + clip(s));
        }
        out.add(s.substring(from));
        return out;
    }

    /** Expands one bracket range: {@code /dev/nvidia[0-2,4]} to four names. */
    static List<String> expand(String s, int line, String key) {
        int open = s.indexOf('[');
        if (open < 0) {
            if (s.isEmpty() || s.contains("]")) {
                throw new GresConfException(line, key + "=" + clip(s) + " is not a name or a range such as"
                        + " /dev/nvidia[0-3]");
            }
            return List.of(s);
        }
        int close = s.indexOf(']', open);
        if (close < 0 || s.indexOf('[', open + 1) >= 0 && s.indexOf('[', open + 1) < close) {
            throw new GresConfException(line, key + "=" + clip(s) + " has an unclosed range; expected a form such"
                    + " as /dev/nvidia[0-3]");
        }
        String head = s.substring(0, open);
        String tail = s.substring(close + 1);
        if (tail.contains("[")) {
            throw new GresConfException(line, key + "=" + clip(s) + " has more than one range; gpusched reads one"
                    + " per name, e.g. /dev/nvidia[0-3]");
        }
        String body = s.substring(open + 1, close);
        List<String> out = new ArrayList<>();
        for (String part : body.split(",", -1)) {
            String[] r = part.split("-", -1);
            try {
                if (r.length == 1 && !r[0].isEmpty()) {
                    out.add(head + r[0] + tail);
                } else if (r.length == 2) {
                    int width = r[0].length();
                    int a = GresRecord.number(r[0]);
                    int z = GresRecord.number(r[1]);
                    if (a < 0 || z < a || z - a >= 1024) {
                        throw new NumberFormatException();
                    }
                    for (int i = a; i <= z; i++) {
                        out.add(head + String.format(Locale.ROOT, "%0" + width + "d", i) + tail);
                    }
                } else {
                    throw new NumberFormatException();
                }
            } catch (NumberFormatException e) {
                throw new GresConfException(line, key + "=" + clip(s) + ": \"" + clip(part) + "\" is not a number or"
                        + " a range a-b with a <= b (at most 1024 names)");
            }
            if (out.size() > 1024) {
                throw new GresConfException(line, key + "=" + clip(s) + " names more than 1024 devices, Slurm's limit");
            }
        }
        return out;
    }

    private static String clip(String s) {
        return Printable.escape(s.length() > 80 ? s.substring(0, 77) + "..." : s);
    }
}
