package io.gpusched.nvml.fuzz;

import io.gpusched.nvml.ProcDriverNvidia;

/**
 * Fuzz target for {@link ProcDriverNvidia#parseInformation(String, String)}, the reader of
 * {@code /proc/driver/nvidia/gpus/<bus>/information}: it documents no exception (a file it cannot use gives empty),
 * so any exception is a finding. A GPU it returns has a model, a UUID and a non-negative minor.
 */
public final class ProcDriverNvidiaFuzzer {
    private ProcDriverNvidiaFuzzer() {
    }

    /** One input: the file's bytes. */
    public static void fuzzerTestOneInput(byte[] input) {
        String s = new String(input, java.nio.charset.StandardCharsets.UTF_8);
        ProcDriverNvidia.parseInformation(s, "0000:06:00.0").ifPresent(g -> {
            if (g.model().isBlank() || g.uuid().isBlank() || g.busLocation() == null
                    || g.minor().orElse(0) < 0) {
                throw new AssertionError("unusable GPU " + g);
            }
        });
    }
}
