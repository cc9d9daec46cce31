package io.gpusched.core.fuzz;

import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuConfigException;

/**
 * Fuzz target for {@link GpuConfig#parse(String, String)}: only GpuConfigException, whose message starts with the
 * source name (and names the key path); a parsed configuration is valid by its own rules.
 */
public final class GpuConfigFuzzer {
    private static final String SOURCE = "fuzz.yaml";

    private GpuConfigFuzzer() {
    }

    /** One input: the YAML document (UTF-8). */
    public static void fuzzerTestOneInput(byte[] input) {
        String s = Contract.text(input);
        GpuConfig c = Contract.expect(GpuConfigException.class, s, msg -> msg.startsWith(SOURCE + ": "),
                () -> GpuConfig.parse(s, SOURCE));
        if (c != null) {
            Contract.check(c.maxGpusPerRequest() >= 0, "negative max_gpus_per_request", s);
            Contract.check(c.backends().stream().noneMatch(String::isBlank), "blank backend", s);
            Contract.check(c.backends().stream().noneMatch(b -> b.startsWith("[")), "a collection as a backend "
                    + c.backends(), s);
        }
    }
}
