package io.gpusched.core;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * The target syntax {@code node1::0,2,3}: a host and, optionally, explicit GPU indices on it. {@code node1} alone
 * means any GPUs of that host; {@code ::0,2} means these GPUs of the local host.
 *
 * @param host    host name, empty for the local host
 * @param indices explicit GPU indices, empty for any
 */
public record GpuTarget(Optional<String> host, List<Integer> indices) {

    private static final Pattern HOST = Pattern.compile("[A-Za-z0-9](?:[A-Za-z0-9._-]{0,252})");
    private static final String FORM = "expected HOST, HOST::I,J,... or ::I,J,... (e.g. \"node1::0,2,3\")";

    /** Copies the list. */
    public GpuTarget {
        indices = List.copyOf(indices);
    }

    /**
     * Parses {@code "node1::0,2,3"}, {@code "node1"} or {@code "::0,2"}.
     *
     * @throws IllegalArgumentException naming the input and the accepted forms, for any text (null included); no
     *                                  other exception is thrown
     */
    public static GpuTarget parse(String text) {
        if (text == null || text.isBlank()) {
            throw new IllegalArgumentException("target is blank; " + FORM);
        }
        String t = text.trim();
        int sep = t.indexOf("::");
        String hostPart = sep < 0 ? t : t.substring(0, sep);
        Optional<String> host = Optional.empty();
        if (!hostPart.isEmpty()) {
            if (!HOST.matcher(hostPart).matches()) {
                throw new IllegalArgumentException("invalid host \"" + hostPart + "\" in target \"" + text + "\"; "
                        + FORM);
            }
            host = Optional.of(hostPart);
        }
        List<Integer> indices = new ArrayList<>();
        if (sep >= 0) {
            String list = t.substring(sep + 2);
            if (list.isBlank()) {
                throw new IllegalArgumentException("target \"" + text + "\" has \"::\" but no GPU indices; " + FORM);
            }
            indices = parseIndices(list, "target \"" + text + "\"");
        } else if (host.isEmpty()) {
            throw new IllegalArgumentException("target \"" + text + "\" names no host; " + FORM);
        }
        return new GpuTarget(host, indices);
    }

    /**
     * Parses a comma-separated list of distinct non-negative device indices ({@code "0,2,3"}).
     *
     * @param what names the input in errors
     * @throws IllegalArgumentException naming the bad element and the accepted form; no other exception is thrown
     */
    public static List<Integer> parseIndices(String list, String what) {
        List<Integer> out = new ArrayList<>();
        for (String part : list.split(",", -1)) {
            String p = part.trim();
            if (!p.matches("[0-9]{1,9}")) {
                throw new IllegalArgumentException("invalid GPU index \"" + part + "\" in " + what
                        + "; expected comma-separated whole numbers such as 0,2,3");
            }
            out.add(Integer.parseInt(p));
        }
        if (new HashSet<>(out).size() != out.size()) {
            throw new IllegalArgumentException(what + " names a GPU index twice: " + out + "; expected distinct"
                    + " indices such as 0,2,3");
        }
        return out;
    }

    @Override
    public String toString() {
        String h = host.orElse("");
        if (indices.isEmpty()) {
            return h;
        }
        StringBuilder s = new StringBuilder(h).append("::");
        for (int i = 0; i < indices.size(); i++) {
            s.append(i == 0 ? "" : ",").append(indices.get(i));
        }
        return s.toString();
    }
}
