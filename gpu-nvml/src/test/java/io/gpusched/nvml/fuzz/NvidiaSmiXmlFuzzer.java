package io.gpusched.nvml.fuzz;

import io.gpusched.nvml.NvidiaSmiXml;

/**
 * Fuzz target for {@link NvidiaSmiXml#parse(String)}, the reader of {@code nvidia-smi -q -x}: a report, or only
 * IllegalArgumentException whose message says it is about nvidia-smi output; any other exception, a stack overflow,
 * running out of memory or hanging is a finding. A parsed GPU has a bus id and a UUID, and no negative memory; its
 * processes have pids of 1 or more and no negative memory.
 */
public final class NvidiaSmiXmlFuzzer {
    private NvidiaSmiXmlFuzzer() {
    }

    /** One input: the XML document (UTF-8). */
    public static void fuzzerTestOneInput(byte[] input) {
        String s = new String(input, java.nio.charset.StandardCharsets.UTF_8);
        NvidiaSmiXml.Report r;
        try {
            r = NvidiaSmiXml.parse(s);
        } catch (IllegalArgumentException e) {
            if (e.getClass() != IllegalArgumentException.class) {
                throw new AssertionError("threw " + e.getClass().getName() + " (an IllegalArgumentException only by"
                        + " inheritance, not the documented error)", e);
            }
            String m = e.getMessage();
            if (m == null || !(m.contains("nvidia-smi") || m.contains("GPU") || m.contains("<gpu>"))) {
                throw new AssertionError("message does not say what was read: " + m, e);
            }
            return;
        }
        for (NvidiaSmiXml.Gpu g : r.gpus()) {
            if (g.pciBusId() == null || g.pciBusId().isBlank() || g.uuid() == null || g.uuid().isBlank()) {
                throw new AssertionError("GPU without bus id or UUID: " + g);
            }
            g.memoryTotalMib().ifPresent(v -> {
                if (v < 0) {
                    throw new AssertionError("negative memory " + v + " MiB: " + g);
                }
            });
            g.memoryUsedMib().ifPresent(v -> {
                if (v < 0) {
                    throw new AssertionError("negative used memory " + v + " MiB: " + g);
                }
            });
            for (NvidiaSmiXml.Process p : g.processes()) {
                if (p.pid() < 1 || p.usedMemoryMib().orElse(0) < 0) {
                    throw new AssertionError("process with pid below 1 or negative memory: " + p);
                }
            }
        }
    }
}
