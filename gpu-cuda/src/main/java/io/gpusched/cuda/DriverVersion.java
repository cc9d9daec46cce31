package io.gpusched.cuda;

import java.util.Arrays;

/**
 * An NVIDIA driver version such as {@code 580.65.06}, kept as written and compared numerically part by part.
 *
 * @param text the version as the driver prints it
 */
public record DriverVersion(String text) implements Comparable<DriverVersion> {

    /** @throws IllegalArgumentException naming the input, e.g. for {@code "latest"} */
    public DriverVersion {
        if (text == null || !text.matches("[0-9]{1,5}(\\.[0-9]{1,6}){0,3}")) {
            throw new IllegalArgumentException("invalid driver version \"" + text
                    + "\"; expected numbers separated by dots, e.g. \"580.65.06\"");
        }
    }

    /** @see #DriverVersion(String) */
    public static DriverVersion parse(String text) {
        return new DriverVersion(text == null ? null : text.trim());
    }

    private int[] parts() {
        return Arrays.stream(text.split("\\.")).mapToInt(Integer::parseInt).toArray();
    }

    /** @return the branch, e.g. 580 */
    public int branch() {
        return parts()[0];
    }

    /** @return true if this is at least {@code other} */
    public boolean atLeast(DriverVersion other) {
        return compareTo(other) >= 0;
    }

    @Override
    public int compareTo(DriverVersion o) {
        int[] a = parts();
        int[] b = o.parts();
        for (int i = 0; i < Math.max(a.length, b.length); i++) {
            int x = i < a.length ? a[i] : 0;
            int y = i < b.length ? b[i] : 0;
            if (x != y) {
                return Integer.compare(x, y);
            }
        }
        return 0;
    }

    @Override
    public String toString() {
        return text;
    }
}
