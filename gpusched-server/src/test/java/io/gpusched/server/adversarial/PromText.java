package io.gpusched.server.adversarial;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A strict reader of the Prometheus text format 0.0.4, written for this review (it does not use the server's code):
 * every line is a HELP, a TYPE or a sample; label values use only the three escapes; every sample belongs to a family
 * whose TYPE came before it; no series twice; histogram buckets cumulative with +Inf equal to _count; counters
 * finite and not negative. Throws IllegalStateException naming the line.
 */
final class PromText {
    private static final Pattern NAME = Pattern.compile("[a-zA-Z_:][a-zA-Z0-9_:]*");
    private static final Pattern LABEL = Pattern.compile("[a-zA-Z_][a-zA-Z0-9_]*");
    private static final Set<String> TYPES = Set.of("counter", "gauge", "histogram", "summary", "untyped");

    /** series key (name + sorted labels) to value */
    final Map<String, Double> series = new LinkedHashMap<>();
    /** family name to type */
    final Map<String, String> types = new HashMap<>();
    /** series key to its family type */
    final Map<String, String> seriesType = new HashMap<>();

    static PromText parse(String text) {
        PromText p = new PromText();
        if (!text.isEmpty() && !text.endsWith("\n")) {
            throw new IllegalStateException("text does not end with a newline");
        }
        Map<String, TreeMap<Double, Double>> buckets = new HashMap<>();
        Map<String, Double> counts = new HashMap<>();
        int n = 0;
        for (String line : text.split("\n", -1)) {
            n++;
            if (line.isEmpty()) {
                continue;
            }
            try {
                if (line.startsWith("#")) {
                    p.comment(line);
                } else {
                    p.sample(line, buckets, counts);
                }
            } catch (RuntimeException e) {
                throw new IllegalStateException("line " + n + " [" + line + "]: " + e.getMessage(), e);
            }
        }
        buckets.forEach((k, b) -> {
            double prev = -1;
            for (double v : b.values()) {
                if (v < prev) {
                    throw new IllegalStateException("histogram buckets of " + k + " not cumulative: " + b);
                }
                prev = v;
            }
            Double inf = b.get(Double.POSITIVE_INFINITY);
            if (inf == null) {
                throw new IllegalStateException("histogram " + k + " has no +Inf bucket");
            }
            Double count = counts.get(k);
            if (count == null || count.doubleValue() != inf.doubleValue()) {
                throw new IllegalStateException("histogram " + k + ": +Inf bucket " + inf + " != _count " + count);
            }
        });
        return p;
    }

    private void comment(String line) {
        String[] f = line.split(" ", 4);
        if (f.length >= 2 && (f[1].equals("HELP") || f[1].equals("TYPE"))) {
            if (f.length < 3 || !NAME.matcher(f[2]).matches()) {
                throw new IllegalStateException("bad metric name in " + f[1]);
            }
            if (f[1].equals("TYPE")) {
                if (f.length != 4 || !TYPES.contains(f[3])) {
                    throw new IllegalStateException("bad TYPE");
                }
                if (types.put(f[2], f[3]) != null) {
                    throw new IllegalStateException("TYPE twice for " + f[2]);
                }
            } else if (f.length == 4) {
                String doc = f[3];
                for (int i = 0; i < doc.length(); i++) {
                    if (doc.charAt(i) == '\\') {
                        char c = i + 1 < doc.length() ? doc.charAt(i + 1) : 0;
                        if (c != '\\' && c != 'n') {
                            throw new IllegalStateException("bad escape in HELP");
                        }
                        i++;
                    }
                }
            }
        }
    }

    private void sample(String line, Map<String, TreeMap<Double, Double>> buckets, Map<String, Double> counts) {
        Matcher m = NAME.matcher(line);
        if (!m.lookingAt()) {
            throw new IllegalStateException("no metric name");
        }
        String name = m.group();
        int i = m.end();
        TreeMap<String, String> labels = new TreeMap<>();
        if (i < line.length() && line.charAt(i) == '{') {
            i++;
            while (true) {
                if (line.charAt(i) == '}') {
                    i++;
                    break;
                }
                Matcher l = LABEL.matcher(line).region(i, line.length());
                if (!l.lookingAt()) {
                    throw new IllegalStateException("bad label name at " + i);
                }
                String key = l.group();
                i = l.end();
                if (line.charAt(i) != '=' || line.charAt(i + 1) != '"') {
                    throw new IllegalStateException("label " + key + " not =\"");
                }
                i += 2;
                StringBuilder v = new StringBuilder();
                while (line.charAt(i) != '"') {
                    char c = line.charAt(i);
                    if (c == '\\') {
                        char e = line.charAt(i + 1);
                        v.append(switch (e) {
                            case '\\' -> '\\';
                            case '"' -> '"';
                            case 'n' -> '\n';
                            default -> throw new IllegalStateException("bad escape \\" + e);
                        });
                        i += 2;
                    } else {
                        v.append(c);
                        i++;
                    }
                }
                i++;
                if (labels.put(key, v.toString()) != null) {
                    throw new IllegalStateException("label " + key + " twice");
                }
                if (line.charAt(i) == ',') {
                    i++;
                } else if (line.charAt(i) != '}') {
                    throw new IllegalStateException("expected , or } at " + i);
                }
            }
        }
        if (i >= line.length() || line.charAt(i) != ' ') {
            throw new IllegalStateException("no space before the value");
        }
        String[] rest = line.substring(i + 1).split(" ", -1);
        if (rest.length < 1 || rest.length > 2) {
            throw new IllegalStateException("value and at most a timestamp expected");
        }
        double value = value(rest[0]);
        if (rest.length == 2) {
            Long.parseLong(rest[1]);
        }
        String family = null;
        String type = null;
        for (String suffix : List.of("", "_total", "_bucket", "_count", "_sum", "_created")) {
            if (name.endsWith(suffix)) {
                String f = name.substring(0, name.length() - suffix.length());
                String t = types.get(f);
                if (t != null && fits(t, suffix)) {
                    family = f;
                    type = t;
                    break;
                }
            }
        }
        if (family == null) {
            throw new IllegalStateException("sample " + name + " has no TYPE before it");
        }
        String key = name + labels;
        if (series.put(key, value) != null) {
            throw new IllegalStateException("series twice: " + key);
        }
        seriesType.put(key, type);
        if ((type.equals("counter") || name.endsWith("_count") || name.endsWith("_bucket"))
                && (!(value >= 0) || Double.isInfinite(value))) {
            throw new IllegalStateException("counter-like " + key + " = " + value);
        }
        if (type.equals("histogram")) {
            TreeMap<String, String> base = new TreeMap<>(labels);
            base.remove("le");
            String hk = family + base;
            if (name.endsWith("_bucket")) {
                String le = labels.get("le");
                if (le == null) {
                    throw new IllegalStateException("bucket without le");
                }
                buckets.computeIfAbsent(hk, k -> new TreeMap<>()).put(value(le), value);
            } else if (name.endsWith("_count")) {
                counts.put(hk, value);
            }
        }
    }

    private static boolean fits(String type, String suffix) {
        return switch (type) {
            case "counter" -> suffix.isEmpty() || suffix.equals("_total") || suffix.equals("_created");
            case "histogram" -> suffix.equals("_bucket") || suffix.equals("_count") || suffix.equals("_sum")
                    || suffix.equals("_created");
            case "summary" -> suffix.isEmpty() || suffix.equals("_count") || suffix.equals("_sum")
                    || suffix.equals("_created");
            default -> suffix.isEmpty();
        };
    }

    private static double value(String s) {
        return switch (s) {
            case "+Inf" -> Double.POSITIVE_INFINITY;
            case "-Inf" -> Double.NEGATIVE_INFINITY;
            case "NaN" -> Double.NaN;
            default -> {
                if (!s.matches("[-+]?(\\d+\\.?\\d*|\\.\\d+)([eE][-+]?\\d+)?")) {
                    throw new IllegalStateException("bad value " + s);
                }
                yield Double.parseDouble(s);
            }
        };
    }

    /** @return values of the series whose key starts with prefix */
    List<Double> values(String prefix) {
        List<Double> out = new ArrayList<>();
        series.forEach((k, v) -> {
            if (k.startsWith(prefix)) {
                out.add(v);
            }
        });
        return out;
    }
}
