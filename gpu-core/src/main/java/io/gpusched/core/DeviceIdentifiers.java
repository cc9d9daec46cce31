package io.gpusched.core;

import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * What a device's identifiers may hold, wherever they come from (a node description, a backend): they reach shell
 * variables ({@code CUDA_VISIBLE_DEVICES=GPU-...} for {@code eval}), {@code docker -e} flags, CDI names, gres.conf and
 * terminals, so a UUID, parent UUID or PCI bus id is a bounded token ({@value #MAX_UUID} characters of letters, digits
 * and {@code . _ : / -}, starting with a letter or digit; no space, comma, quote or newline), and a name, driver
 * version, architecture or property is bounded printable text (no control or format characters, no line or paragraph
 * separator). The scheduler checks every device an inventory gives it; node descriptions are checked when read.
 */
public final class DeviceIdentifiers {
    /** Longest UUID, parent UUID or PCI bus id accepted. */
    public static final int MAX_UUID = 128;
    /** Longest device name, driver version, architecture, property key or value accepted. */
    public static final int MAX_TEXT = 256;

    private static final Pattern TOKEN = Pattern.compile("[A-Za-z0-9][A-Za-z0-9._:/-]*");

    private DeviceIdentifiers() {
    }

    /**
     * @param d a device
     * @return the first identifier of {@code d} that is not acceptable, as a sentence naming the field, the device and
     *         what is valid; empty when all are
     */
    public static Optional<String> problem(GpuDevice d) {
        String who = "device " + d.index();
        Optional<String> p = token(d.uuid(), who + " uuid");
        if (p.isEmpty()) {
            who = "device " + d.index() + " (" + d.uuid() + ")";
            p = d.parentUuid().flatMap(x -> token(x, "device " + d.index() + " (" + d.uuid() + ") parent"));
        }
        if (p.isEmpty()) {
            p = token(d.pciBusId(), who + " pci_bus_id");
        }
        if (p.isEmpty()) {
            p = text(d.name(), who + " name");
        }
        if (p.isEmpty() && d.driverVersion().isPresent()) {
            p = text(d.driverVersion().get(), who + " driver_version");
        }
        if (p.isEmpty() && d.architecture().isPresent()) {
            p = text(d.architecture().get(), who + " architecture");
        }
        for (Map.Entry<String, String> e : d.properties().entrySet()) {
            if (p.isPresent()) {
                break;
            }
            p = text(e.getKey(), who + " property name").or(() -> text(e.getValue(), "device " + d.index()
                    + " property " + e.getKey()));
        }
        return p;
    }

    /**
     * @param d a device
     * @throws IllegalArgumentException naming the first identifier that is not acceptable (see {@link #problem})
     */
    public static void check(GpuDevice d) {
        problem(d).ifPresent(p -> {
            throw new IllegalArgumentException(p);
        });
    }

    /**
     * @param value a UUID, parent UUID or PCI bus id
     * @param what  names it in the sentence
     * @return why it is not a token of at most {@value #MAX_UUID} letters, digits and {@code . _ : / -}; empty if it is
     */
    public static Optional<String> token(String value, String what) {
        if (value.length() > MAX_UUID) {
            return Optional.of(what + " is " + value.length() + " characters long (\"" + shown(value) + "\"); at"
                    + " most " + MAX_UUID + " are accepted");
        }
        if (!TOKEN.matcher(value).matches()) {
            return Optional.of(what + " \"" + shown(value) + "\" holds a character other than letters, digits and"
                    + " . _ : / - (or does not start with a letter or digit); such identifiers reach shell variables,"
                    + " container flags and terminals, so they are refused (e.g."
                    + " GPU-8f0c3f26-7d2a-4c5e-9b1a-0a1b2c3d4e5f)");
        }
        return Optional.empty();
    }

    /**
     * @param value a name or other text
     * @param what  names it in the sentence
     * @return why it is not printable text of at most {@value #MAX_TEXT} characters; empty if it is
     */
    public static Optional<String> text(String value, String what) {
        if (value.length() > MAX_TEXT) {
            return Optional.of(what + " is " + value.length() + " characters long (\"" + shown(value) + "\"); at"
                    + " most " + MAX_TEXT + " are accepted");
        }
        for (int i = 0; i < value.length();) {
            int c = value.codePointAt(i);
            if (!printable(c)) {
                return Optional.of(what + " \"" + shown(value) + "\" holds the unprintable character U+"
                        + String.format(Locale.ROOT, "%04X", c) + " at " + i
                        + "; names are printable text (no control, format or"
                        + " line-separator characters)");
            }
            i += Character.charCount(c);
        }
        return Optional.empty();
    }

    /** @return true for a code point that prints as itself: not a control, format, separator or lone surrogate */
    static boolean printable(int c) {
        return switch (Character.getType(c)) {
            case Character.CONTROL, Character.FORMAT, Character.LINE_SEPARATOR, Character.PARAGRAPH_SEPARATOR,
                    Character.SURROGATE, Character.UNASSIGNED ->
                false;
            default -> true;
        };
    }

    /** @return {@code s} with unprintable characters escaped as {@code \\uXXXX}, cut to 80 characters */
    static String shown(String s) {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < s.length() && b.length() < 80;) {
            int c = s.codePointAt(i);
            if (printable(c)) {
                b.appendCodePoint(c);
            } else {
                b.append(String.format(Locale.ROOT, "\\u%04X", c));
            }
            i += Character.charCount(c);
        }
        return b.length() >= 80 && s.length() > 80 ? b + "..." : b.toString();
    }
}
