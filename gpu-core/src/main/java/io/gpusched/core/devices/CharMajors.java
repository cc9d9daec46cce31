package io.gpusched.core.devices;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Collections;
import java.util.Map;
import java.util.OptionalInt;
import java.util.TreeMap;
import java.util.regex.Pattern;

/**
 * The character-device majors of a node by driver name: the {@code Character devices:} part of {@code /proc/devices}
 * (read each time it is asked for, since a module such as {@code nvidia-uvm} is loaded on demand), or the majors a
 * simulated node describes of itself ({@code char_majors} in its description). Values only: no I/O but
 * {@link #read(Path)}.
 */
public final class CharMajors {
    /** The largest major Linux gives (majors are 12 bits). */
    public static final int MAX_MAJOR = 4095;
    /** At most this much of {@code /proc/devices} is read (the kernel's is about 1 KiB). */
    static final int MAX_BYTES = 64 * 1024;
    /** At most this many names in one {@link #parse(String)} (a node has a few dozen drivers). */
    static final int MAX_NAMES = 512;
    /** A driver name: printable ASCII, no space, {@code ,} or {@code =} (the separators of {@link #format()}). */
    private static final Pattern NAME = Pattern.compile("[!-~&&[^,=]]{1,64}");
    private static final Pattern DIGITS = Pattern.compile("[0-9]{1,4}");
    private static final CharMajors NONE = new CharMajors(new TreeMap<>());

    private final Map<String, Integer> byName;

    private CharMajors(TreeMap<String, Integer> byName) {
        this.byName = Collections.unmodifiableMap(byName);
    }

    /** @return no majors at all */
    public static CharMajors none() {
        return NONE;
    }

    /**
     * @param majors majors by driver name
     * @return them, checked
     * @throws IllegalArgumentException naming a name that is not 1 to 64 printable ASCII characters without space,
     *                                  {@code ,} or {@code =}, or a major outside 1..4095
     */
    public static CharMajors of(Map<String, Integer> majors) {
        TreeMap<String, Integer> m = new TreeMap<>();
        for (Map.Entry<String, Integer> e : majors.entrySet()) {
            String name = e.getKey();
            if (name == null || !NAME.matcher(name).matches()) {
                throw new IllegalArgumentException("character device name \"" + name + "\" is not valid: expected 1"
                        + " to 64 printable ASCII characters without space, ',' or '=' (such as nvidia-uvm)");
            }
            Integer major = e.getValue();
            if (major == null || major < 1 || major > MAX_MAJOR) {
                throw new IllegalArgumentException("major " + major + " of " + name + " is not valid: expected 1 to "
                        + MAX_MAJOR);
            }
            m.put(name, major);
        }
        return new CharMajors(m);
    }

    /**
     * Reads the character majors of {@code <procRoot>/devices}, a regular file, at most 64 KiB of it.
     *
     * @return the majors; none when the file is absent, not a regular file or unreadable (no module is known loaded)
     */
    public static CharMajors read(Path procRoot) {
        Path file = procRoot.resolve("devices");
        // a FIFO or device planted in a fixture root would block or never end: only a regular file is opened
        if (!Files.isRegularFile(file)) {
            return NONE;
        }
        try (InputStream in = Files.newInputStream(file)) {
            return parseProcDevices(new String(in.readNBytes(MAX_BYTES), StandardCharsets.UTF_8));
        } catch (IOException | SecurityException e) {
            return NONE;
        }
    }

    /**
     * Parses the text of {@code /proc/devices}: the {@code <major> <name>} lines after {@code Character devices:} and
     * before {@code Block devices:}. Lenient, as the file is the kernel's: a line that is not a major of 1..4095 and a
     * valid name is skipped; a name listed twice keeps its first major. Never throws.
     *
     * @param text the file's text
     * @return the character majors
     */
    public static CharMajors parseProcDevices(String text) {
        TreeMap<String, Integer> m = new TreeMap<>();
        boolean chars = false;
        for (String line : text.split("\n", -1)) {
            if (line.startsWith("Character devices")) {
                chars = true;
            } else if (line.startsWith("Block devices")) {
                chars = false;
            } else if (chars) {
                String[] f = line.trim().split("[ \t]+");
                if (f.length == 2 && DIGITS.matcher(f[0]).matches() && NAME.matcher(f[1]).matches()) {
                    int major = Integer.parseInt(f[0]);
                    if (major >= 1 && major <= MAX_MAJOR) {
                        m.putIfAbsent(f[1], major);
                    }
                }
            }
        }
        return new CharMajors(m);
    }

    /**
     * Parses the form {@link #format()} writes: {@code name=major} pairs separated by commas ({@code
     * nvidia-caps=235,nvidia-uvm=510}); empty for none.
     *
     * @param text the pairs
     * @return the majors
     * @throws IllegalArgumentException naming the input and the pair that is not {@code name=major} (a name of
     *                                  printable ASCII without space, {@code ,} or {@code =}, a major of 1..4095), or a
     *                                  name given twice
     */
    public static CharMajors parse(String text) {
        if (text.isBlank()) {
            return NONE;
        }
        String[] pairs = text.split(",", -1);
        if (pairs.length > MAX_NAMES) {
            throw new IllegalArgumentException("character majors \"" + shorten(text) + "\" list " + pairs.length
                    + " names; at most " + MAX_NAMES + " are valid");
        }
        TreeMap<String, Integer> m = new TreeMap<>();
        for (String pair : pairs) {
            String p = pair.trim();
            int eq = p.indexOf('=');
            String name = eq < 0 ? p : p.substring(0, eq).trim();
            String number = eq < 0 ? "" : p.substring(eq + 1).trim();
            if (eq < 0 || !NAME.matcher(name).matches() || !DIGITS.matcher(number).matches()
                    || Integer.parseInt(number) < 1 || Integer.parseInt(number) > MAX_MAJOR) {
                throw new IllegalArgumentException("character majors \"" + shorten(text) + "\": \"" + shorten(p)
                        + "\" is not name=major; expected pairs such as nvidia-uvm=510 (a name of printable ASCII"
                        + " without space, ',' or '=', a major of 1 to " + MAX_MAJOR + "), separated by commas");
            }
            if (m.put(name, Integer.parseInt(number)) != null) {
                throw new IllegalArgumentException("character majors \"" + shorten(text) + "\" give " + name
                        + " twice; expected each name once");
            }
        }
        return new CharMajors(m);
    }

    private static String shorten(String s) {
        return s.length() <= 200 ? s : s.substring(0, 200) + "...";
    }

    /** @return the major of a driver ({@code nvidia-uvm}), when the node has it */
    public OptionalInt major(String name) {
        Integer m = byName.get(name);
        return m == null ? OptionalInt.empty() : OptionalInt.of(m);
    }

    /** @return the majors by name, sorted by name */
    public Map<String, Integer> asMap() {
        return byName;
    }

    /** @return {@code name=major} pairs sorted by name, separated by commas ({@link #parse(String)} reads it) */
    public String format() {
        StringBuilder b = new StringBuilder();
        byName.forEach((k, v) -> b.append(b.isEmpty() ? "" : ",").append(k).append('=').append(v));
        return b.toString();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof CharMajors c && c.byName.equals(byName);
    }

    @Override
    public int hashCode() {
        return byName.hashCode();
    }

    @Override
    public String toString() {
        return "CharMajors[" + format() + "]";
    }
}
