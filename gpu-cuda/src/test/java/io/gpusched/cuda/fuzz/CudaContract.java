package io.gpusched.cuda.fuzz;

import io.gpusched.cuda.CudaVersion;
import java.nio.charset.StandardCharsets;
import java.util.Optional;
import java.util.function.Supplier;
import java.util.regex.Pattern;

/**
 * The parser contract the gpu-cuda fuzz targets check: a result, or only {@link IllegalArgumentException} with a
 * message that says what would be valid; any other exception or error is a finding. Independent of the parsers.
 */
final class CudaContract {
    private static final Pattern SAYS_WHAT_IS_VALID = Pattern.compile("(?i)expected|valid|must|e\\.g\\.|at least"
            + "|at most");

    private CudaContract() {
    }

    static String text(byte[] input) {
        return new String(input, StandardCharsets.UTF_8);
    }

    static String show(String s) {
        String t = s.length() > 200 ? s.substring(0, 200) + "...(" + s.length() + " chars)" : s;
        return "\"" + t.replace("\n", "\\n").replace("\0", "\\0") + "\"";
    }

    /** Runs a version parser; checks the result is a valid version or the error is the documented one. */
    static Optional<CudaVersion> version(String input, String mustMention, Supplier<Optional<CudaVersion>> parser) {
        try {
            Optional<CudaVersion> v = parser.get();
            if (v == null) {
                throw new AssertionError("null instead of Optional for " + show(input));
            }
            v.ifPresent(x -> {
                if (x.major() < 1 || x.minor() < 0 || x.patch() < 0) {
                    throw new AssertionError("invalid version " + x + " for " + show(input));
                }
                if (!CudaVersion.parse(x.toString()).equals(x)) {
                    throw new AssertionError(x + " does not parse back, for " + show(input));
                }
            });
            return v;
        } catch (IllegalArgumentException e) {
            if (e.getClass() != IllegalArgumentException.class) {
                throw new AssertionError("threw " + e.getClass().getName() + " for " + show(input), e);
            }
            String m = e.getMessage();
            if (m == null || !m.contains(mustMention) || !SAYS_WHAT_IS_VALID.matcher(m).find()) {
                throw new AssertionError("message " + (m == null ? null : show(m)) + " does not name " + mustMention
                        + " or what would be valid, for " + show(input), e);
            }
            return Optional.empty();
        } catch (RuntimeException e) {
            throw new AssertionError("threw " + e.getClass().getName() + " where only IllegalArgumentException is"
                    + " documented, for " + show(input), e);
        }
    }
}
