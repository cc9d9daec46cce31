package io.gpusched.core.fuzz;

import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuRequests;
import java.math.BigInteger;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * Fuzz target for {@link GpuRequests#fromResources(Map)}: a workflow's {@code resources:} map as a YAML or JSON loader
 * would hand it over (strings, ints, longs, big integers, doubles, booleans, lists, maps, nulls; null keys). The
 * input is one entry per line, {@code key=value}; the key {@code ~} is a null key; the value's first character picks
 * its type ({@code #} a number of the smallest fitting type, {@code ~} null, {@code [} a list, {@code {} a map,
 * {@code !} a boolean, otherwise a string). Contract: only IllegalArgumentException whose message names
 * {@code resources}; a request has a count of at least 1.
 */
public final class ResourcesFuzzer {
    private ResourcesFuzzer() {
    }

    /** One input: the map, one {@code key=value} per line. */
    public static void fuzzerTestOneInput(byte[] input) {
        String s = Contract.text(input);
        Map<String, Object> m = new HashMap<>();
        for (String line : s.split("\n")) {
            int eq = line.indexOf('=');
            String k = eq < 0 ? line : line.substring(0, eq);
            String v = eq < 0 ? "" : line.substring(eq + 1);
            m.put(k.equals("~") ? null : k, value(v));
        }
        Optional<GpuRequest> r = Contract.expect(IllegalArgumentException.class, s, msg -> msg.contains("resources"),
                () -> GpuRequests.fromResources(m));
        if (r != null && r.isPresent()) {
            Contract.check(r.get().count() >= 1, "count " + r.get().count(), s);
        }
    }

    private static Object value(String v) {
        if (v.isEmpty()) {
            return v;
        }
        String rest = v.substring(1);
        switch (v.charAt(0)) {
            case '#':
                try {
                    BigInteger b = new BigInteger(rest.trim());
                    if (b.bitLength() < 32) {
                        return b.intValue();
                    }
                    return b.bitLength() < 64 ? (Object) b.longValue() : b;
                } catch (NumberFormatException e) {
                    try {
                        return Double.parseDouble(rest);
                    } catch (NumberFormatException e2) {
                        return rest;
                    }
                }
            case '~':
                return null;
            case '[':
                return List.of(rest);
            case '{':
                return Map.of("k", rest);
            case '!':
                return Boolean.parseBoolean(rest);
            default:
                return v;
        }
    }
}
