package io.gpusched.core.internal;

import io.gpusched.core.GpuConfigException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Function;
import java.util.regex.Pattern;
import org.yaml.snakeyaml.LoaderOptions;
import org.yaml.snakeyaml.Yaml;
import org.yaml.snakeyaml.constructor.AbstractConstruct;
import org.yaml.snakeyaml.constructor.Construct;
import org.yaml.snakeyaml.constructor.SafeConstructor;
import org.yaml.snakeyaml.error.YAMLException;
import org.yaml.snakeyaml.nodes.Node;
import org.yaml.snakeyaml.nodes.ScalarNode;
import org.yaml.snakeyaml.nodes.Tag;

/**
 * A YAML reader that knows where it is: every value carries its key path ({@code gpu.strategy}) so errors can name
 * it, and unknown keys are rejected. Values are plain scalars (strings, whole numbers, decimals, booleans), lists
 * and mappings only: the tags {@code !!binary}, {@code !!timestamp}, {@code !!set}, {@code !!omap} and
 * {@code !!pairs} are refused, and a tagged scalar that is not of its tag's form ({@code !!int four},
 * {@code !!bool maybe}) is an error, never a default. Every problem, including the YAML library's own, is a
 * {@link GpuConfigException} naming the source. Internal: not part of the API.
 */
public final class StrictYaml {
    private final String source;
    private final String path;
    private final Map<String, Object> map;

    private StrictYaml(String source, String path, Map<String, Object> map) {
        this.source = source;
        this.path = path;
        this.map = map;
    }

    /**
     * Parses a document whose root is a mapping (an empty document reads as an empty mapping).
     *
     * @throws GpuConfigException naming {@code source} if the text is not YAML of the accepted kinds or its root is
     *                            not a mapping
     */
    public static StrictYaml parse(String text, String source) {
        Object root;
        try {
            LoaderOptions options = new LoaderOptions();
            options.setAllowDuplicateKeys(false);
            options.setMaxAliasesForCollections(10);
            options.setAllowRecursiveKeys(false);
            root = new Yaml(new PlainConstructor(options)).load(text);
        } catch (YAMLException | IllegalArgumentException | IllegalStateException | ClassCastException e) {
            // SnakeYAML's own constructors throw NumberFormatException for "!!int four" and the like
            throw new GpuConfigException(source + ": not valid YAML: " + firstLine(e.getMessage())
                    + "; expected a mapping of keys to plain values (text, numbers, true/false), lists and mappings",
                    e);
        }
        if (root == null) {
            return new StrictYaml(source, "", Map.of());
        }
        return new StrictYaml(source, "", asMap(root, source, "(document root)"));
    }

    /** Largest file {@link #read(java.nio.file.Path, String)} reads: SnakeYAML's own limit (3 Mi code points). */
    public static final long MAX_FILE_BYTES = TextFiles.MAX_BYTES;

    /**
     * Reads a YAML file as UTF-8, refusing one larger than {@link #MAX_FILE_BYTES} and anything that is not a regular
     * file (links followed) before opening it: opening a FIFO blocks until a writer comes, and a device such as
     * {@code /dev/zero} reports size 0 and never ends. The read itself stops after {@link #MAX_FILE_BYTES} + 1 bytes,
     * whatever the size said.
     *
     * @param what names the file in errors ("configuration", "node description")
     * @throws GpuConfigException if it cannot be read, is not a regular file, is too large or is not UTF-8
     */
    public static String read(Path file, String what) {
        return TextFiles.readUtf8(file, what);
    }

    /** A whole number in plain decimal: an optional sign, then 0 or digits without a leading zero. */
    private static final Pattern DECIMAL_INT = Pattern.compile("[-+]?(0|[1-9][0-9]*)");
    /** A decimal fraction or exponent form, without underscores or sexagesimal parts. */
    private static final Pattern DECIMAL_FLOAT =
            Pattern.compile("[-+]?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([eE][-+]?[0-9]+)?");

    /**
     * SafeConstructor without the tags a configuration has no use for, strict about {@code !!bool}, and reading
     * numbers only in plain decimal.
     */
    private static final class PlainConstructor extends SafeConstructor {
        PlainConstructor(LoaderOptions options) {
            super(options);
            Construct refuse = new AbstractConstruct() {
                @Override
                public Object construct(Node node) {
                    throw new YAMLException("the tag " + node.getTag() + " is not accepted (line "
                            + (node.getStartMark() == null ? "?" : node.getStartMark().getLine() + 1) + ")");
                }
            };
            for (Tag t : List.of(Tag.BINARY, Tag.TIMESTAMP, Tag.SET, Tag.OMAP, Tag.PAIRS)) {
                yamlConstructors.put(t, refuse);
            }
            // YAML 1.1 reads 010 as octal 8, 0x10 as 16, 1_000 as 1000 and 1:30 as 90 (sexagesimal), and 1:30.5 or
            // 0000:07:00.0 as a float: a number is a number only in plain decimal; any other form is kept as the text
            // written, which a number setting refuses (naming it) and a text setting keeps as it is
            Construct ints = yamlConstructors.get(Tag.INT);
            Construct floats = yamlConstructors.get(Tag.FLOAT);
            yamlConstructors.put(Tag.INT, new AbstractConstruct() {
                @Override
                public Object construct(Node node) {
                    String v = node instanceof ScalarNode sn ? sn.getValue() : "";
                    return DECIMAL_INT.matcher(v).matches() ? ints.construct(node) : v;
                }
            });
            yamlConstructors.put(Tag.FLOAT, new AbstractConstruct() {
                @Override
                public Object construct(Node node) {
                    String v = node instanceof ScalarNode sn ? sn.getValue() : "";
                    return DECIMAL_FLOAT.matcher(v).matches() ? floats.construct(node) : v;
                }
            });
            yamlConstructors.put(Tag.BOOL, new AbstractConstruct() {
                @Override
                public Object construct(Node node) {
                    String v = node instanceof ScalarNode sn ? sn.getValue() : String.valueOf(node);
                    switch (v.toLowerCase(Locale.ROOT)) {
                        case "true", "yes", "on":
                            return Boolean.TRUE;
                        case "false", "no", "off":
                            return Boolean.FALSE;
                        default:
                            throw new YAMLException("\"" + v + "\" is not a boolean (line "
                                    + (node.getStartMark() == null ? "?" : node.getStartMark().getLine() + 1)
                                    + "); use true or false");
                    }
                }
            });
        }
    }

    private static String firstLine(String s) {
        return s == null ? "" : s.strip().replace('\n', ' ');
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> asMap(Object value, String source, String at) {
        if (!(value instanceof Map)) {
            throw new GpuConfigException(source + ": " + at + " must be a mapping of keys to values, was "
                    + describe(value));
        }
        Map<String, Object> out = new LinkedHashMap<>();
        for (Map.Entry<Object, Object> e : ((Map<Object, Object>) value).entrySet()) {
            out.put(String.valueOf(e.getKey()), e.getValue());
        }
        return out;
    }

    private static String describe(Object v) {
        if (v == null) {
            return "empty";
        }
        if (v instanceof Map) {
            return "a mapping";
        }
        if (v instanceof List) {
            return "a list";
        }
        return "\"" + v + "\"";
    }

    /** @return the key path of a child key */
    public String pathOf(String key) {
        return path.isEmpty() ? key : path + "." + key;
    }

    /** @return the source name (file) this document came from */
    public String source() {
        return source;
    }

    /** Rejects keys outside {@code allowed}, naming the first unknown key's path and the valid keys. */
    public StrictYaml onlyKeys(Set<String> allowed) {
        for (String k : map.keySet()) {
            if (!allowed.contains(k)) {
                throw error(pathOf(k), "unknown key; valid keys" + (path.isEmpty() ? "" : " under " + path)
                        + " are " + new TreeSet<>(allowed));
            }
        }
        return this;
    }

    /** @return true if the key is present with a non-null value */
    public boolean has(String key) {
        return map.get(key) != null;
    }

    /** @return the keys present */
    public Set<String> keys() {
        return map.keySet();
    }

    /** @return the nested mapping under {@code key}, or an empty one when absent */
    public StrictYaml child(String key) {
        Object v = map.get(key);
        return new StrictYaml(source, pathOf(key), v == null ? Map.of() : asMap(v, source, pathOf(key)));
    }

    /** @return the raw value (String, Number, Boolean, List, Map) or null */
    public Object raw(String key) {
        return map.get(key);
    }

    /** @return a scalar as text, or {@code fallback} when absent */
    public String string(String key, String fallback) {
        Object v = map.get(key);
        if (v == null) {
            return fallback;
        }
        if (v instanceof Map || v instanceof List) {
            throw error(pathOf(key), "must be a single value, was " + describe(v));
        }
        return String.valueOf(v);
    }

    /** @return a required scalar as text */
    public String requiredString(String key) {
        String s = string(key, null);
        if (s == null || s.isBlank()) {
            throw error(pathOf(key), "is required");
        }
        return s;
    }

    /** @return a boolean, or {@code fallback} when absent */
    public boolean bool(String key, boolean fallback) {
        Object v = map.get(key);
        if (v == null) {
            return fallback;
        }
        if (v instanceof Boolean b) {
            return b;
        }
        throw error(pathOf(key), "must be true or false, was " + describe(v));
    }

    /** @return an integer within [min, max], or {@code fallback} when absent */
    public int integer(String key, int fallback, int min, int max) {
        Object v = map.get(key);
        if (v == null) {
            return fallback;
        }
        if (v instanceof Integer i && i >= min && i <= max) {
            return i;
        }
        throw error(pathOf(key), "must be a whole number from " + min + " to " + max + ", was " + describe(v)
                + (v instanceof String t && NUMBER_LIKE.matcher(t).matches() ? "; write it in plain decimal (YAML 1.1"
                        + " reads a leading 0 as octal, 0x as hexadecimal, and allows _ and : in numbers; gpusched"
                        + " reads none of them)" : ""));
    }

    /** Text YAML 1.1 may read as a number in a form other than plain decimal ({@code 010}, {@code 0x1f}). */
    private static final Pattern NUMBER_LIKE = Pattern.compile("[-+]?(0[0-7_]+|0x[0-9a-fA-F_]+|0b[01_]+|[0-9][0-9_:]*"
            + "(\\.[0-9_]*)?)");

    /** @return an integer within [min, max] that must be present */
    public int requiredInteger(String key, int min, int max) {
        if (!has(key)) {
            throw error(pathOf(key), "is required (a whole number from " + min + " to " + max + ")");
        }
        return integer(key, 0, min, max);
    }

    /**
     * Converts a scalar with {@code parser}, turning its {@link IllegalArgumentException} into an error naming the
     * path.
     *
     * @return the parsed value, or {@code fallback} when absent
     */
    public <T> T parsed(String key, Function<String, T> parser, T fallback) {
        return parsed(key, parser, fallback, null);
    }

    /**
     * As {@link #parsed(String, Function, Object)}; a list or mapping in place of the scalar is refused naming
     * {@code valid}, what the key takes.
     *
     * @param valid what the key takes, for the refusal of a list or mapping; null to say nothing more
     */
    public <T> T parsed(String key, Function<String, T> parser, T fallback, String valid) {
        Object v = map.get(key);
        if (valid != null && (v instanceof Map || v instanceof List)) {
            throw error(pathOf(key), "must be a single value, was " + describe(v) + "; valid: " + valid);
        }
        String s = string(key, null);
        if (s == null) {
            return fallback;
        }
        try {
            return parser.apply(s);
        } catch (IllegalArgumentException e) {
            throw error(pathOf(key), e.getMessage());
        }
    }

    /** @return a list of scalars as text (a single scalar reads as a one-element list); empty when absent */
    public List<String> strings(String key) {
        Object v = map.get(key);
        if (v == null) {
            return List.of();
        }
        List<String> out = new ArrayList<>();
        if (v instanceof List<?> l) {
            for (int i = 0; i < l.size(); i++) {
                Object e = l.get(i);
                if (e == null || e instanceof Map || e instanceof List) {
                    throw error(pathOf(key) + "[" + i + "]", "must be a single value, was " + describe(e));
                }
                out.add(String.valueOf(e));
            }
        } else if (v instanceof Map) {
            throw error(pathOf(key), "must be a list, was a mapping");
        } else {
            out.add(String.valueOf(v));
        }
        return out;
    }

    /**
     * As {@link #strings}, refusing numbers and booleans ({@code [5, true]}) where text is meant (paths, names).
     *
     * @param what what each element is, for the refusal ("a path such as /opt/cuda")
     */
    public List<String> texts(String key, String what) {
        Object v = map.get(key);
        if (v instanceof List<?> l) {
            for (int i = 0; i < l.size(); i++) {
                if (l.get(i) instanceof Number || l.get(i) instanceof Boolean) {
                    throw error(pathOf(key) + "[" + i + "]", "must be text (" + what + "), was " + describe(l.get(i))
                            + (l.get(i) instanceof Boolean ? " (a boolean)" : " (a number)") + "; quote it if it is"
                            + " meant as text");
                }
            }
        } else if (v instanceof Number || v instanceof Boolean) {
            throw error(pathOf(key), "must be a list of text (" + what + "), was " + describe(v));
        }
        return strings(key);
    }

    /** @return a list of mappings; empty when absent */
    public List<StrictYaml> maps(String key) {
        Object v = map.get(key);
        if (v == null) {
            return List.of();
        }
        if (!(v instanceof List<?> l)) {
            throw error(pathOf(key), "must be a list of mappings, was " + describe(v));
        }
        List<StrictYaml> out = new ArrayList<>();
        for (int i = 0; i < l.size(); i++) {
            String p = pathOf(key) + "[" + i + "]";
            out.add(new StrictYaml(source, p, asMap(l.get(i), source, p)));
        }
        return out;
    }

    /** @return a list of lists (rows such as {@code [0, 1, 2]}); empty when absent */
    public List<List<Object>> rows(String key) {
        Object v = map.get(key);
        if (v == null) {
            return List.of();
        }
        if (!(v instanceof List<?> l)) {
            throw error(pathOf(key), "must be a list, was " + describe(v));
        }
        List<List<Object>> out = new ArrayList<>();
        for (int i = 0; i < l.size(); i++) {
            if (!(l.get(i) instanceof List<?> row)) {
                throw error(pathOf(key) + "[" + i + "]", "must be a list such as [0, 1, 2], was " + describe(l.get(i)));
            }
            out.add(new ArrayList<>(row));
        }
        return out;
    }

    /** @return an error naming the source and the key path */
    public GpuConfigException error(String keyPath, String problem) {
        return new GpuConfigException(source + ": " + keyPath + ": " + problem);
    }
}
