package io.gpusched.cuda;

import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A CUDA version: toolkit or runtime {@code major.minor}, with the component patch where known ({@code 12.4.127}).
 * Ordered by major, minor, patch.
 *
 * @param major major version
 * @param minor minor version
 * @param patch component patch (cudart build), 0 when unknown
 */
public record CudaVersion(int major, int minor, int patch) implements Comparable<CudaVersion> {

    private static final Pattern FORM = Pattern.compile("\\s*([0-9]{1,3})\\.([0-9]{1,3})(?:\\.([0-9]{1,12}))?\\s*");

    /** @throws IllegalArgumentException for a major below 1 or negative parts */
    public CudaVersion {
        if (major < 1 || minor < 0 || patch < 0) {
            throw new IllegalArgumentException("invalid CUDA version " + major + "." + minor + "." + patch
                    + "; expected a major version of at least 1 and a minor and patch of at least 0");
        }
    }

    /**
     * Parses {@code "12.4"}, {@code "12.4.127"}, and date-stamped forms such as {@code "12.1.20230222"} (the date
     * is not a patch and is dropped).
     *
     * @throws IllegalArgumentException naming the input and the accepted forms, for any text (null included); no
     *                                  other exception is thrown
     */
    public static CudaVersion parse(String text) {
        Matcher m = text == null ? null : FORM.matcher(text);
        if (m == null || !m.matches()) {
            throw new IllegalArgumentException("invalid CUDA version \"" + text
                    + "\"; expected MAJOR.MINOR or MAJOR.MINOR.PATCH, e.g. \"12.4\" or \"12.4.127\"");
        }
        int patch = 0;
        if (m.group(3) != null && m.group(3).length() < 8) {
            patch = Integer.parseInt(m.group(3));
        }
        if (Integer.parseInt(m.group(1)) < 1) {
            throw new IllegalArgumentException("invalid CUDA version \"" + text + "\": the major version is 0;"
                    + " expected MAJOR.MINOR with MAJOR >= 1, e.g. \"12.4\"");
        }
        return new CudaVersion(Integer.parseInt(m.group(1)), Integer.parseInt(m.group(2)), patch);
    }

    /**
     * @return the version of an API integer such as {@code 12040} (1000 x major + 10 x minor)
     * @throws IllegalArgumentException below 1000
     */
    public static CudaVersion fromApiInt(int v) {
        if (v < 1000) {
            throw new IllegalArgumentException("CUDA API version " + v + " is not of the form 1000*major + 10*minor;"
                    + " expected e.g. 12040 for 12.4");
        }
        return new CudaVersion(v / 1000, (v % 1000) / 10, 0);
    }

    /** @return this without its patch, for comparing major.minor */
    public CudaVersion majorMinor() {
        return new CudaVersion(major, minor, 0);
    }

    /** @return true if major.minor is at least that of {@code other} */
    public boolean atLeast(CudaVersion other) {
        return majorMinor().compareTo(other.majorMinor()) >= 0;
    }

    @Override
    public int compareTo(CudaVersion o) {
        if (major != o.major) {
            return Integer.compare(major, o.major);
        }
        if (minor != o.minor) {
            return Integer.compare(minor, o.minor);
        }
        return Integer.compare(patch, o.patch);
    }

    @Override
    public String toString() {
        return patch == 0 ? major + "." + minor : major + "." + minor + "." + patch;
    }
}
