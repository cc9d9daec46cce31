package io.gpusched.cuda;

import io.gpusched.core.internal.Printable;
import java.nio.file.Path;
import java.util.Objects;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * What a job needs of CUDA: a minimum or exact version, and/or a preferred installation.
 *
 * @param minimum      lowest acceptable major.minor
 * @param exact        exact major.minor (or major alone, minor 0 and {@code majorOnly})
 * @param majorOnly    {@code exact} constrains the major version only
 * @param installation a preferred installation root (or alias)
 */
public record CudaRequirement(Optional<CudaVersion> minimum, Optional<CudaVersion> exact, boolean majorOnly,
        Optional<Path> installation) {

    /** No requirement: the newest compatible installation, or none. */
    public static final CudaRequirement NONE =
            new CudaRequirement(Optional.empty(), Optional.empty(), false, Optional.empty());

    private static final Pattern FORM = Pattern.compile("\\s*(>=)?\\s*([0-9]{1,3})(?:\\.([0-9]{1,3}))?\\s*");

    /** Checks the components. */
    public CudaRequirement {
        Objects.requireNonNull(minimum, "minimum");
        Objects.requireNonNull(exact, "exact");
        Objects.requireNonNull(installation, "installation");
    }

    /**
     * Parses {@code ">=12.1"}, {@code ">=12"} (12.0 or newer), {@code "12.4"} (exactly 12.4) or {@code "12"} (any
     * 12.x).
     *
     * @throws IllegalArgumentException naming the input and the accepted forms, for any text (null included); no
     *                                  other exception is thrown
     */
    public static CudaRequirement parse(String text) {
        Matcher m = text == null ? null : FORM.matcher(text);
        if (m == null || !m.matches() || Integer.parseInt(m.group(2)) < 1) {
            throw new IllegalArgumentException("invalid CUDA requirement \"" + Printable.clipped(text)
                    + "\"; expected \">=12.1\" or \">=12\" (that or newer), \"12.4\" (exactly) or \"12\" (any 12.x)");
        }
        CudaVersion v = new CudaVersion(Integer.parseInt(m.group(2)),
                m.group(3) == null ? 0 : Integer.parseInt(m.group(3)), 0);
        if (m.group(1) != null) {
            return new CudaRequirement(Optional.of(v), Optional.empty(), false, Optional.empty());
        }
        return new CudaRequirement(Optional.empty(), Optional.of(v), m.group(3) == null, Optional.empty());
    }

    /** @return a copy preferring the installation at {@code root} */
    public CudaRequirement preferring(Path root) {
        return new CudaRequirement(minimum, exact, majorOnly, Optional.of(root));
    }

    /** @return true if a version satisfies the version part of this requirement */
    public boolean accepts(CudaVersion v) {
        if (minimum.isPresent() && !v.atLeast(minimum.get())) {
            return false;
        }
        if (exact.isPresent()) {
            CudaVersion e = exact.get();
            return majorOnly ? v.major() == e.major() : v.majorMinor().equals(e.majorMinor());
        }
        return true;
    }

    @Override
    public String toString() {
        String v = minimum.map(x -> ">=" + x).or(() -> exact.map(x -> majorOnly ? x.major() + ".x" : x.toString()))
                .orElse("any");
        return "CUDA " + v + installation.map(p -> " at " + p).orElse("");
    }
}
