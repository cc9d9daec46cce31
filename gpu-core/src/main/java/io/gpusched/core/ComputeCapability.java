package io.gpusched.core;

import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * An NVIDIA compute capability such as 8.6; ordered by major then minor.
 *
 * @param major major version (e.g. 8 for Ampere)
 * @param minor minor version, 0 to 9
 */
public record ComputeCapability(int major, int minor) implements Comparable<ComputeCapability> {

    private static final Pattern DOTTED = Pattern.compile("([0-9]{1,2})\\.([0-9])");
    private static final Pattern SM = Pattern.compile("(?:sm_|compute_)([0-9]{1,2})([0-9])");

    /** @throws IllegalArgumentException if a component is out of range */
    public ComputeCapability {
        if (major < 1 || major > 99 || minor < 0 || minor > 9) {
            throw new IllegalArgumentException("compute capability " + major + "." + minor
                    + " is out of range; expected major 1..99 and minor 0..9");
        }
    }

    /**
     * Parses {@code "8.6"}, or the compiler's {@code "sm_86"} / {@code "compute_90"}.
     *
     * @throws IllegalArgumentException naming the input and the accepted forms
     */
    public static ComputeCapability parse(String text) {
        if (text != null) {
            String t = text.trim();
            Matcher m = DOTTED.matcher(t);
            if (!m.matches()) {
                m = SM.matcher(t);
            }
            if (m.matches()) {
                return new ComputeCapability(Integer.parseInt(m.group(1)), Integer.parseInt(m.group(2)));
            }
        }
        throw new IllegalArgumentException("invalid compute capability \"" + text
                + "\"; expected MAJOR.MINOR such as \"8.6\" or \"9.0\", or \"sm_86\"");
    }

    /** @return true if this is at least {@code other} */
    public boolean isAtLeast(ComputeCapability other) {
        return compareTo(other) >= 0;
    }

    @Override
    public int compareTo(ComputeCapability o) {
        return major != o.major ? Integer.compare(major, o.major) : Integer.compare(minor, o.minor);
    }

    @Override
    public String toString() {
        return major + "." + minor;
    }
}
