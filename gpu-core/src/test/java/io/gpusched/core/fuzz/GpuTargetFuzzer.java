package io.gpusched.core.fuzz;

import io.gpusched.core.GpuTarget;
import java.util.HashSet;

/**
 * Fuzz target for {@link GpuTarget#parse(String)}: only IllegalArgumentException naming the input; a parsed target
 * has a host or indices, distinct non-negative indices, and its {@code toString()} parses back to itself.
 */
public final class GpuTargetFuzzer {
    private GpuTargetFuzzer() {
    }

    /** One input: the target text (UTF-8). */
    public static void fuzzerTestOneInput(byte[] input) {
        String s = Contract.text(input);
        GpuTarget t = Contract.expect(IllegalArgumentException.class, s,
                msg -> msg.contains(s) || (s.isBlank() && msg.contains("blank")), () -> GpuTarget.parse(s));
        if (t != null) {
            Contract.check(t.host().isPresent() || !t.indices().isEmpty(), "target with neither host nor GPUs", s);
            Contract.check(t.indices().stream().allMatch(i -> i >= 0), "negative index " + t.indices(), s);
            Contract.check(new HashSet<>(t.indices()).size() == t.indices().size(), "repeated index", s);
            Contract.check(GpuTarget.parse(t.toString()).equals(t), t + " does not parse back", s);
        }
    }
}
